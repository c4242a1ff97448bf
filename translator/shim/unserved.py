"""The CLI's commands, which caliban-claude has not: `mcp serve`'s refusal told in the protocol
as well, the others named (they would otherwise be read as the SDK protocol started wrong).

`claude mcp serve` runs Claude Code's own tools for an MCP client, with no model in the loop
(its recorded run: tools/list, then tools/call Bash without one API request). caliban has no
door that runs one of its tools by name (its `mcp serve` is the drive surface: runs of the
model, polls, permits), and a call put to the model as a prompt is not that call. So the shim
serves nothing; but an MCP client shows a server's stderr rarely, and a server that just
exits is "connection closed" to it. So the first request, the client's `initialize`, is
answered with a JSON-RPC error that holds the same one line.
"""

from __future__ import annotations

import os
import select
import time
from typing import BinaryIO

import orjson

WAIT_S = 5.0  # how long a client may take to send its initialize (a pipe nobody writes to: not forever)
LONGEST = 1 << 20  # an initialize is small: a longer first line is not one
SERVER_ERROR = -32000  # JSON-RPC's implementation-defined server error
# The commands `claude --help` lists (fixtures/claude-code/help.txt), each name and alias, but `mcp`.
COMMANDS = frozenset(("agents", "attach", "auth", "auto-mode", "doctor", "gateway", "import", "install", "logs",
                      "plugin", "plugins", "purge", "respawn", "rm", "setup-token", "stop", "kill", "ultrareview",
                      "update", "upgrade"))  # fmt: skip


def command_line(command: str, prog: str) -> str:
    """The one line for one of the CLI's commands."""
    return (f"{command}: not available: {prog} has none of Claude Code's commands (its sessions, installs, "
            f"plugins, accounts are Claude Code's own); it is the CLI's print mode (-p) and the Agent SDKs' protocol")


def answer(fd: int, out: BinaryIO, line: str, wait_s: float = WAIT_S) -> None:
    """Read the client's first request from `fd` (within `wait_s`; a terminal: none) and, if it
    is a request (it has an id), answer it on `out` with the error `line`."""
    if os.isatty(fd):
        return
    first = _first_line(fd, time.monotonic() + wait_s)
    try:
        request = orjson.loads(first) if first else None
    except orjson.JSONDecodeError:
        return
    if isinstance(request, dict) and "id" in request and request.get("jsonrpc") == "2.0":
        error = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": SERVER_ERROR, "message": line}}
        out.write(orjson.dumps(error) + b"\n")
        out.flush()


def _first_line(fd: int, deadline: float) -> bytes:
    """The bytes up to the first newline (the end, the deadline or LONGEST first: what came)."""
    got = b""
    while b"\n" not in got and len(got) <= LONGEST:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got.split(b"\n", 1)[0]
