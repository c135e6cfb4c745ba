"""An MCP client from the Python `mcp` SDK, driving `dsh mcp serve` over stdio or HTTP.

Usage: client.py DSH_BINARY [dsh args...] (stdio: starts the server itself), or
client.py http://HOST:PORT/mcp [TOKEN] (streamable HTTP, with `Authorization: Bearer TOKEN` when
a token is given). Lists the tools, makes the calls given as JSON on stdin (a list of
[name, arguments], or {"calls": [...], "elicit": [answer, ...]}), and prints one JSON object: the
tool names, each call's result (isError and text blocks) and the messages of the elicitation
requests it was sent. With "elicit", the client declares elicitation and answers each request
with the next answer: "allow" (accept, allow: true), "accept-false" (accept, allow: false),
"decline" or "cancel"; without it, it declares no elicitation. A call named "?wait_for" makes no
call: it lists the tools again until its argument "tool" is among them (at most 20 s), and
reports the names listed last as its text.
"""

import asyncio
import contextlib
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


@contextlib.asynccontextmanager
async def transport(argv):
    if argv[0].startswith("http://") or argv[0].startswith("https://"):
        headers = {"Authorization": f"Bearer {argv[1]}"} if len(argv) > 1 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(argv[0], http_client=http) as (read, write):
                yield read, write
    else:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (read, write):
            yield read, write


async def main() -> None:
    given = json.load(sys.stdin)
    calls = given["calls"] if isinstance(given, dict) else given
    answers = list(given.get("elicit", [])) if isinstance(given, dict) else None
    elicited = []

    async def elicit(_context, params):
        elicited.append(params.message)
        answer = answers.pop(0) if answers else "decline"
        if answer == "allow":
            return types.ElicitResult(action="accept", content={"allow": True})
        if answer == "accept-false":
            return types.ElicitResult(action="accept", content={"allow": False})
        return types.ElicitResult(action=answer)

    callback = elicit if answers is not None else None
    async with transport(sys.argv[1:]) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            listed = await session.list_tools()
            out = {"tools": [t.name for t in listed.tools], "calls": [], "elicited": elicited}
            for name, arguments in calls:
                if name == "?wait_for":
                    deadline = asyncio.get_running_loop().time() + 20
                    while True:
                        names = [t.name for t in (await session.list_tools()).tools]
                        if arguments["tool"] in names or asyncio.get_running_loop().time() > deadline:
                            break
                        await asyncio.sleep(0.05)
                    out["calls"].append({"isError": False, "text": names})
                    continue
                result = await session.call_tool(name, arguments)
                out["calls"].append(
                    {
                        "isError": bool(result.is_error),
                        "text": [c.text for c in getattr(result, "content", []) if c.type == "text"],
                    }
                )
    print(json.dumps(out))


asyncio.run(main())
