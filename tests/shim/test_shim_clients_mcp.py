"""@steipete/claude-code-mcp 1.10.12 (npm, pinned): an MCP server whose one tool, `claude_code`,
runs `claude --dangerously-skip-permissions -p PROMPT` in the call's `workFolder` and answers with
its stdout. Here its claude is caliban-claude (CLAUDE_CLI_NAME, an absolute path, as its README
says) on the fake caliban, and its MCP client is the Python `mcp` SDK over stdio, as an MCP host
runs it; on either backend (`-p` passes no callbacks: caliban -p unless CALIBAN_CLAUDE_BACKEND=drive
forces caliban mcp serve). As root the real CLI refuses the flag unless IS_SANDBOX=1, and so does caliban-claude:
the server's error carries that one line."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from support_fixtures import FIXTURES, npm_installed
from support_processes import fake_caliban

from translator.transcripts.files import session_path

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PACKAGE, VERSION = "@steipete/claude-code-mcp", "1.10.12"
CACHE = Path(os.environ.get("CALIBAN_CLAUDE_CODE_MCP_CACHE") or Path.home() / ".cache" / "caliban-claude-code-mcp")
PROMPT = "how many files are here?"
# the drive's run: caliban -p's tool_use_two_turns.jsonl as caliban mcp serve plays it
DRIVE = {"CALIBAN_CLAUDE_BACKEND": "drive", "FAKE_SERVE_SCRIPT": json.dumps({"messages": [{"turns": [
    {"text": "Listing.", "tools": [{"name": "Bash", "input": {"command": "ls"}, "id": "toolu_ls", "result": "a\nb\nc"}]},
    {"text": "There are 3 files."}]}]})}  # fmt: skip
ROOT = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"  # the CLI's line


@pytest.fixture(scope="module")
def server() -> Path:
    """The server's entry script, installed once into the cache."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the claude-code-mcp tests were SKIPPED: node and npm are not installed (.ci/run installs them)")
    return npm_installed(CACHE, {PACKAGE: VERSION}) / PACKAGE / "dist" / "server.js"


async def call(server: Path, root: Path, **extra: str) -> Any:
    """One `claude_code` call from an MCP client, the server's claude caliban-claude: its result,
    or the error the server answered."""
    fake_caliban(root)
    (root / "work").mkdir()
    (root / "home").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "CLAUDE_CLI_NAME": SHIM,
           **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},  # (the shim's code: a worktree's)
           "CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
           "CLAUDE_CONFIG_DIR": str(root / "claude"), "FAKE_CALIBAN_LOG": str(root / "calls.jsonl"),
           "FAKE_SERVE_LOG": str(root / "serve.jsonl"), "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}]), **extra}  # fmt: skip
    params = StdioServerParameters(command="node", args=[str(server)], env=env)
    with open(root / "server.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams, ClientSession(*streams) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == ["claude_code"]
            try:
                return await session.call_tool("claude_code", {"prompt": PROMPT, "workFolder": str(root / "work")})
            except MCPError as exc:  # (raised out of the client's task group it would come wrapped in a group)
                return exc


def ran(root: Path, backend: str) -> tuple[str, str, str | None]:
    """What caliban was given: its folder, the prompt, and the mode its Bash ran under (-p: its
    --permission-mode; the drive: the shim's answer to caliban's ask, `allow`, which bypass gives)."""
    log = root / "serve.jsonl"
    assert log.exists() is (backend == "drive")  # (the drive's server started, or none)
    if backend == "print":
        (call,) = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
        return call["cwd"], call["stdin"], call["argv"][call["argv"].index("--permission-mode") + 1]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (start,) = [line for line in lines if "pid" in line]
    (run,) = [line["in"]["params"]["arguments"] for line in lines
              if line.get("in", {}).get("params", {}).get("name") == "caliban_run"]  # fmt: skip
    (permit,) = [line for line in lines if "permit" in line]
    return start["cwd"], run["prompt"], "bypassPermissions" if permit["allow"] else None


@pytest.mark.parametrize("backend", ["print", "drive"])
async def test_the_tool_answers_with_caliban_claudes_text_run_in_the_work_folder(
    server: Path, tmp_path: Path, backend: str
) -> None:
    result = await call(server, tmp_path, IS_SANDBOX="1", **(DRIVE if backend == "drive" else {}))
    assert not result.is_error
    assert [(c.type, c.text) for c in result.content] == [("text", "There are 3 files.\n")]
    assert ran(tmp_path, backend) == (str(tmp_path / "work"), PROMPT, "bypassPermissions")
    assert (tmp_path / "calls.jsonl").exists() is (backend == "print")  # (caliban -p never ran on the drive)
    (file,) = (tmp_path / "claude" / "projects").glob("*/*.jsonl")
    assert file.parent == Path(session_path(str(tmp_path / "claude"), str(tmp_path / "work"), file.stem)).parent
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert lines[0]["message"]["content"] == PROMPT
    assert lines[-2]["message"]["content"] == [{"text": "There are 3 files.", "type": "text"}]


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the CLI takes --dangerously-skip-permissions")
async def test_as_root_without_is_sandbox_the_error_is_the_clis_one_line(server: Path, tmp_path: Path) -> None:
    refused = await call(server, tmp_path)
    assert isinstance(refused, MCPError)
    assert f"Command failed with exit code 1\nStderr: {ROOT}\nStdout: " in str(refused)
    assert not (tmp_path / "calls.jsonl").exists()  # caliban never ran
