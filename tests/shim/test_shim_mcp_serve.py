"""An MCP client of `caliban-claude mcp serve` (the Python `mcp` package's own stdio client):
the CLI serves its tools there (set-t5/mcp-serve/: initialize, tools/list, tools/call Bash run
with no model); caliban has no door that runs a tool by name, so the shim serves nothing, and
the client's initialize is answered with the one line that says so (issue 40)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from translator.shim.main import MCP_SERVE

SHIM = str(Path(sys.executable).with_name("caliban-claude"))


async def initialize(errlog: TextIO) -> MCPError | None:
    """What the client's initialize raised (caught in the session: it would leave in a group)."""
    server = StdioServerParameters(command=SHIM, args=["mcp", "serve"], env=dict(os.environ))
    async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        try:
            await session.initialize()
        except MCPError as exc:
            return exc
    return None


def test_an_mcp_clients_initialize_is_told_why_nothing_is_served() -> None:
    with tempfile.NamedTemporaryFile("w+", encoding="utf-8") as errlog:
        refused = asyncio.run(asyncio.wait_for(initialize(errlog), 30))
        errlog.seek(0)
        said = errlog.read().splitlines()
    assert refused is not None
    assert (refused.code, refused.message) == (-32000, MCP_SERVE)
    assert said == [f"caliban-claude: {MCP_SERVE}"]  # and once on stderr


def test_a_client_that_sends_nothing_is_not_waited_for_forever() -> None:
    with subprocess.Popen([SHIM, "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as server:  # fmt: skip
        assert server.wait(timeout=20) == 64  # its stdin held open, never written
        assert server.stdout is not None and server.stdout.read() == b""
