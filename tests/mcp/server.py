"""An MCP server written with the Python `mcp` SDK (its `MCPServer`), for dsh's MCP client tests.

Usage: server.py [--die-at-start | --http PORT] (stdio unless --http: streamable HTTP on
127.0.0.1:PORT at /mcp). Tools: `add` (read-only), `shout` (writes nothing, but is
not declared read-only), `fail` (raises: an `isError` result), `slow` (sleeps), `crash` (ends the
process mid-call), `picture` (an image block), `grow` (adds `extra`, removes `shout`, and says
the tool list changed), `progressing` (reports progress as it goes), `reading` (structured
content matching its output schema), `bad_reading` (structured content that does not match),
`tidy` (annotated read-only, but writes to the events file), `huge` (a text result of the
given size), `garble` (writes a line that is not JSON-RPC to stdout instead of answering),
and, for concurrent calls, three read-only tools: `meet` (waits until `count` calls of its
`group` are in progress at once, at most 15 s), `hold` (waits up to `seconds`) and `gate` (waits
until the events file holds a given line, at most 15 s). With the environment variable
DSH_TEST_EVENTS naming a file, `hold` and `gate` append `started TAG` when they start, `hold`
appends `cancelled TAG` when its handler is cancelled, and each `notifications/cancelled` the
server receives for a `hold` call appends `notifications/cancelled for TAG` (read where the
pinned SDK, mcp 2.3.0, routes notifications: the one proof that the client sent it, since a
closed connection cancels the handler too).
Over stdio, a server that exits by itself (its input closed) appends `exited on its own`.
With --die-at-start it exits before the handshake, saying why on stderr. With the environment
variable DSH_TEST_STARTS naming a file, each start appends a line to it, and from the second
start on the server lists `reborn` instead of `shout`.
"""

import asyncio
import atexit
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

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


def extra() -> str:
    """A tool that appears once `grow` ran."""
    return "extra here"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra`, removes `shout`, and tells the client its tool list changed."""
    server.add_tool(extra)
    server.remove_tool("shout")
    # 2026-07-28: to the client's `subscriptions/listen` stream; before: a plain notification.
    await ctx.notify_tools_changed()
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception as e:  # not allowed on a 2026-07-28 connection
        print(f"legacy list_changed not sent: {e}", file=sys.stderr, flush=True)
    return "grown"


@server.tool()
async def progressing(seconds: float, steps: int, ctx: Context) -> str:
    """Works for `seconds`, reporting progress `steps` times on the way."""
    for i in range(steps):
        await asyncio.sleep(seconds / steps)
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"done after {steps} steps"


class Reading(BaseModel):
    celsius: float
    place: str


@server.tool()
def reading(place: str) -> Reading:
    """Today's temperature, as structured content."""
    return Reading(celsius=21.5, place=place)


@server.tool()
def bad_reading(place: str) -> CallToolResult:
    """Declares a Reading but returns structured content that is not one."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"warm in {place}")],
        structured_content={"celsius": "warm", "place": place},
    )


# A schema published without a model is advertised but not checked by the SDK: the lie goes out.
server._tool_manager.get_tool("bad_reading").fn_metadata.output_schema = Reading.model_json_schema()


EVENTS = os.environ.get("DSH_TEST_EVENTS")


def event(line: str) -> None:
    if EVENTS:
        with open(EVENTS, "a") as f:
            f.write(line + "\n")


_groups: dict = {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def meet(group: str, count: int, tag: str) -> str:
    """Waits until `count` calls of `group` are in progress at once (at most 15 s)."""
    arrived, everyone = _groups.setdefault(group, ([], asyncio.Event()))
    arrived.append(tag)
    if len(arrived) >= count:
        everyone.set()
    try:
        await asyncio.wait_for(everyone.wait(), 15)
    except asyncio.TimeoutError:
        return f"{tag} alone: only {len(arrived)} of {count} arrived in 15 s"
    return f"{tag} met {count}"


_held: dict = {}


def _record_cancelled():
    from mcp.shared import jsonrpc_dispatcher

    dispatcher = jsonrpc_dispatcher.JSONRPCDispatcher
    route = dispatcher._dispatch_notification

    def recording(self, msg, *args, **kwargs):
        if msg.method == "notifications/cancelled":
            rid = str((msg.params or {}).get("requestId"))
            event(f"notifications/cancelled for {_held.get(rid, rid)}")
        return route(self, msg, *args, **kwargs)

    dispatcher._dispatch_notification = recording


_record_cancelled()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hold(seconds: float, tag: str, ctx: Context) -> str:
    """Waits `seconds`, noting its start and its cancellation in the events file."""
    _held[str(ctx.request_context.request_id)] = tag
    event(f"started {tag}")
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        event(f"cancelled {tag}")
        raise
    return f"{tag} held {seconds} s"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def gate(line: str, tag: str) -> str:
    """Waits until the events file holds `line` (at most 15 s)."""
    event(f"started {tag}")
    for _ in range(1500):
        if EVENTS and os.path.exists(EVENTS):
            with open(EVENTS) as f:
                if line in f.read().splitlines():
                    return f"{tag} saw {line}"
        await asyncio.sleep(0.01)
    return f"{tag} did not see {line} in 15 s"


# Failure cases.

# The real stdout, kept before the SDK diverts fd 1 to stderr (it serves the protocol from a
# private duplicate, so a print cannot corrupt it): what `garble` writes goes on the wire.
WIRE = os.dup(1)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def tidy(tag: str) -> str:
    """Claims to be read-only, but writes `wrote TAG` to the events file."""
    event(f"wrote {tag}")
    return f"tidied {tag}"


@server.tool()
def huge(megabytes: float) -> str:
    """A text result of about `megabytes` MB, numbered lines of 100 bytes."""
    lines = int(megabytes * 1_000_000) // 100
    return "".join(f"line {i:08d} " + "x" * 85 + "\n" for i in range(lines))


@server.tool()
async def garble(kind: str) -> str:
    """Answers with a line that is not JSON (`kind` "not-json") or JSON that is not JSON-RPC
    ("not-jsonrpc"), written straight to stdout, and never answers properly."""
    line = b"this is not json {" if kind == "not-json" else b'{"hello": "world"}'
    os.write(WIRE, line + b"\n")
    await asyncio.sleep(3600)
    return "never"


starts = os.environ.get("DSH_TEST_STARTS")
if starts:
    with open(starts, "a") as f:
        f.write("start\n")
    with open(starts) as f:
        if len(f.readlines()) >= 2:
            server.remove_tool("shout")

            @server.tool()
            def reborn() -> str:
                """Only on a restarted server."""
                return "reborn here"


if "--http" in sys.argv:
    server.run("streamable-http", port=int(sys.argv[sys.argv.index("--http") + 1]))
else:
    # Written only when the server ends by itself (its input closed), not when a signal ends
    # it: the proof that the client closed it as the stdio transport asks.
    atexit.register(event, "exited on its own")
    server.run("stdio")
