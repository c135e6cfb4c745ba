"""An MCP server written with the Python `mcp` SDK (its `MCPServer`), for dsh's MCP client tests.

Usage: server.py [--die-at-start | --http PORT] (stdio unless --http: streamable HTTP on
127.0.0.1:PORT at /mcp). Tools: `add` (read-only), `shout` (writes nothing, but is
not declared read-only), `fail` (raises: an `isError` result), `slow` (sleeps), `crash` (ends the
process mid-call), `picture` (an image block). With --die-at-start it exits before the handshake, saying why on stderr.
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.types import ToolAnnotations

if "--die-at-start" in sys.argv:
    print("no configuration found: giving up", file=sys.stderr)
    sys.exit(3)

server = MCPServer("pytools")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> str:
    """Adds two whole numbers."""
    return f"{a} + {b} = {a + b}"


@server.tool()
def shout(text: str) -> str:
    """Says the text louder."""
    return text.upper() + "!"


@server.tool()
def fail(why: str) -> str:
    """Always fails, with the reason given."""
    raise ValueError(f"failed on purpose: {why}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def crash() -> str:
    """Ends the server process in the middle of the call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(7)


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
    )
    return Image(data=png, format="png")


if "--http" in sys.argv:
    server.run("streamable-http", port=int(sys.argv[sys.argv.index("--http") + 1]))
else:
    server.run("stdio")
