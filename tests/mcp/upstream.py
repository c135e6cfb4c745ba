"""A minimal stdio MCP server (plain JSON-RPC, no SDK) that misbehaves on request, for the tests
of how dsh starts and ends upstream servers.

Usage: upstream.py [--grandchild PIDFILE] [--silent-start]

--grandchild PIDFILE: ignore SIGTERM, start `sleep 301` (which inherits the ignored SIGTERM),
write its pid to PIDFILE, then serve. Only SIGKILL to the whole process group ends both.
--silent-start: say on stderr why it waits, then never answer `initialize`.

It offers one tool, `hello`, answering "hello".
"""

import json
import os
import signal
import subprocess
import sys
import time

args = sys.argv[1:]

if "--grandchild" in args:
    pidfile = args[args.index("--grandchild") + 1]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = subprocess.Popen(["sleep", "301"])
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(sleeper.pid))
    os.replace(pidfile + ".tmp", pidfile)

if "--silent-start" in args:
    print("waiting for a licence key that never comes", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    rid = request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "upstream", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": "hello",
                    "description": "Says hello.",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hello"}]}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
