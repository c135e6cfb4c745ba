"""An MCP client from the Python `mcp` SDK, driving `dsh mcp serve` over stdio.

Usage: client.py DSH_BINARY [dsh args...]. Lists the tools, makes the calls given as JSON on
stdin (a list of [name, arguments]), and prints one JSON object: the tool names and each
call's result (isError and text blocks).
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    calls = json.load(sys.stdin)
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write):
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
