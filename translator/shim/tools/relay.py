"""`python -m translator.shim.tools.relay SOCKET SERVER`: the stdio MCP server caliban starts for
one of the app's SDK servers. A byte pump and nothing more: caliban's JSON-RPC lines go to the
shim's socket (after one hello line naming the server, with the token caliban was given for
its relays in their environment), the shim's answers come back on
stdout. The shim decides everything; the relay ends when either side closes."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

import orjson

from translator.exits import EX_UNAVAILABLE, EX_USAGE
from translator.shim.say import say

CHUNK = 1 << 16
TOKEN_ENV = "CALIBAN_CLAUDE_RELAY_TOKEN"  # the proof that caliban started it (its settings file gives it)


def _pump(read: int, write: int) -> None:
    try:
        while chunk := os.read(read, CHUNK):
            view = memoryview(chunk)
            while view:
                view = view[os.write(write, view) :]
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        say("usage: python -m translator.shim.tools.relay SOCKET SERVER (caliban-claude starts it)")
        return EX_USAGE
    path, server = argv
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        conn.sendall(orjson.dumps({"server": server, "token": os.environ.get(TOKEN_ENV, "")}) + b"\n")
    except OSError as exc:
        say(f"MCP relay {server}: cannot reach the shim at {path}: {exc.strerror or exc}")
        return EX_UNAVAILABLE
    back = threading.Thread(target=_pump, args=(conn.fileno(), 1), daemon=True)
    back.start()
    _pump(0, conn.fileno())  # caliban closed our stdin: it is done with the server
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    back.join(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
