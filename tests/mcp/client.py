"""An MCP client from the Python `mcp` SDK, driving `dsh mcp serve` over stdio or HTTP.

Usage: client.py DSH_BINARY [dsh args...] (stdio: starts the server itself), or
client.py http://HOST:PORT/mcp [TOKEN] (streamable HTTP, with `Authorization: Bearer TOKEN` when
a token is given). Lists the tools, makes the calls given as JSON on stdin (a list of
[name, arguments]), and prints one JSON object: the tool names and each call's result (isError
and text blocks).
"""

import asyncio
import contextlib
import json
import sys

from mcp import ClientSession, StdioServerParameters
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
    calls = json.load(sys.stdin)
    async with transport(sys.argv[1:]) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out = {"tools": [t.name for t in listed.tools], "calls": []}
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                out["calls"].append(
                    {
                        "isError": bool(result.is_error),
                        "text": [c.text for c in getattr(result, "content", []) if c.type == "text"],
                    }
                )
    print(json.dumps(out))


asyncio.run(main())
