#!/usr/bin/env python3
"""A small MCP server over stdio for oml's fault tests (tests/mcp.rs), standard library only.

Usage: fake_server.py MODE [MARKER_FILE]
  normal  answers initialize and offers the tools below
  fail    writes to stderr and exits 3 before answering
  hang    reads requests and never answers
MARKER_FILE, when given, gets one line per notification the server receives (to see that a
cancelled call was announced) and "stdin closed" at end of input; without it, the file that
$FAKE_MCP_MARKER names does (to see that a server's env reached it).
"""
import json
import os
import sys
import threading
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
marker = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("FAKE_MCP_MARKER")


def note(text):
    if marker:
        with open(marker, "a") as f:
            f.write(text + "\n")


LOCK = threading.Lock()


def send(msg):
    with LOCK:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


OBJ = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS = [
    {"name": "echo", "description": "Echo the text", "inputSchema": OBJ,
     "annotations": {"readOnlyHint": True}},
    {"name": "wipe", "description": "Pretend to delete everything", "inputSchema": {"type": "object"},
     "annotations": {"destructiveHint": True}},
    {"name": "big", "description": "A 20 MB answer", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "crash", "description": "Exit in the middle of the call", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "slow", "description": "Take a minute", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "grow", "description": "Add the tool 'extra' and say the list changed",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "fails", "description": "Report an error", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "bad_props", "description": "Malformed schema", "inputSchema": {"type": "object", "properties": "oops"}},
    {"name": "bad_schema", "description": "Not even an object", "inputSchema": "nope"},
]
EXTRA = {"name": "extra", "description": "Appears after grow", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": True}}


def text(t, error=False):
    return {"content": [{"type": "text", "text": t}], "isError": error}


def call(name, args):
    if name == "echo":
        return text("echo: " + str(args.get("text", "")))
    if name == "wipe":
        return text("wiped")
    if name == "big":
        return text("x" * (20 * 1024 * 1024))
    if name == "crash":
        sys.stderr.write("fake server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(7)
    if name == "slow":
        time.sleep(60)
        return text("slept")
    if name == "grow":
        TOOLS.append(EXTRA)
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("grown")
    if name == "fails":
        return text("it went wrong", error=True)
    return None


if mode == "fail":
    sys.stderr.write("fake server: cannot start (on purpose)\n")
    sys.exit(3)

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:
        note("notification " + msg.get("method", "?"))
        continue
    if mode == "hang":
        continue
    method, rid = msg.get("method"), msg["id"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "fake", "version": "1.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        p = msg.get("params", {})
        if p.get("name") == "slow":
            # Answered from a thread, so that the cancel notification is still read.
            threading.Thread(target=lambda rid=rid: send({"jsonrpc": "2.0", "id": rid, "result": call("slow", {})}), daemon=True).start()
            continue
        result = call(p.get("name"), p.get("arguments") or {})
        if result is None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": result})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method " + str(method)}})
note("stdin closed")
