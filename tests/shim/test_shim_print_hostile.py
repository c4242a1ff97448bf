"""`caliban-claude` where the world is careless (issue 32): stdout on a full disk in print mode, a
prompt that is no UTF-8, a system prompt too large for a command line. The installed command as
a real process (the TypeScript Agent SDK under node for the system prompt), the fake caliban
(tests/fake_caliban.py) behind it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, SUPPORT
from support_processes import fake_caliban, running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
DRIVE = SUPPORT / "ts_sdk" / "drive.mjs"
SDK_ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    wrapper = fake_caliban(tmp_path)
    return {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
            "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl"), "CALIBAN_CLAUDE_ARGS": "",
            "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "hi.jsonl")}])}  # fmt: skip


def calls(env: dict[str, str]) -> list[dict[str, Any]]:
    log = Path(env["FAKE_CALIBAN_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_stdout_on_a_full_disk_is_a_write_error(env: dict[str, str], fmt: str) -> None:
    """`> /dev/full`: the output is lost, so the command says so and exits 74 (EX_IOERR), in every
    format (text and json write theirs at the end, after the run)."""
    verbose = ["--verbose"] if fmt == "stream-json" else []
    with open("/dev/full", "wb") as full:
        got = subprocess.run([SHIM, "-p", "hi", "--output-format", fmt, *verbose], stdin=subprocess.DEVNULL,
                             stdout=full, stderr=subprocess.PIPE, env=env, timeout=30)  # fmt: skip
    assert got.returncode == 74, got.stderr
    assert got.stderr.decode().splitlines()[-1] == "caliban-claude: write error: No space left on device"


def test_a_prompt_that_is_no_utf8_reaches_caliban_as_node_reads_it(env: dict[str, str]) -> None:
    """A prompt argument of Latin-1 bytes: read as Claude Code (node) reads its argv, each bad
    byte U+FFFD; the run is caliban's, not an internal error."""
    got = subprocess.run([SHIM.encode(), b"-p", b"caf\xe9 \xff?"], stdin=subprocess.DEVNULL, capture_output=True,
                         env=env, timeout=30)  # fmt: skip
    assert (got.returncode, got.stderr) == (0, b""), got.stderr
    assert got.stdout == b"Hello! How can I help?\n"
    (call,) = calls(env)
    assert call["stdin"] == "caf\ufffd \ufffd?"


def test_an_sdk_session_with_an_argument_that_is_no_utf8_leaves_no_caliban_blocked(env: dict[str, str]) -> None:
    """The SDK's --append-system-prompt with a byte that is no UTF-8 (the Python SDK encodes a
    lone surrogate so): the message runs with U+FFFD in its place, and no caliban is left."""
    argv = [a.encode() for a in SDK_ARGV] + [b"--append-system-prompt", b"Be terse \xff."]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    message = {"type": "user", "message": {"role": "user", "content": "hi"}, "parent_tool_use_id": None}
    out, err = proc.communicate(json.dumps(message).encode() + b"\n", timeout=30)
    result = [f for f in map(json.loads, out.splitlines()) if f["type"] == "result"]
    assert proc.returncode == 0 and len(result) == 1 and not result[0]["is_error"], (out[-500:], err)
    assert b"internal error" not in err
    (call,) = calls(env)
    assert call["stdin"] == "Be terse \ufffd.\n\nhi"
    deadline = time.monotonic() + 5
    while running(call["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(call["pid"])


def test_a_system_prompt_too_large_for_a_command_line_goes_by_file(sdk: Path, env: dict[str, str], tmp_path: Path) -> None:
    """The TypeScript SDK sends its systemPrompt in initialize: one of 200 KB is more than one
    argument may be (Linux: 128 KiB), so it reaches caliban as `--system-file` (system_prompt.rs
    reads it at start), removed when the session ends; a small one stays `--system TEXT`."""
    big = "You are a careful reviewer. " * 7500  # 210,000 bytes
    options = {"pathToClaudeCodeExecutable": SHIM, "cwd": str(tmp_path), "systemPrompt": big}
    spec = {"prompt": ["one", "two"], "options": options}
    env = {**env, "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "benign_text.jsonl")}])}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(["node", str(DRIVE), str(sdk), f"@{tmp_path / 'spec.json'}"], capture_output=True, env=env,
                          timeout=90)  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines()]
    results = [e["data"] for e in events if e["kind"] == "msg" and e["data"]["type"] == "result"]
    assert [r["is_error"] for r in results] == [False, False], (results, done.stderr[-2000:])
    first, second = calls(env)
    assert first["system"] == second["system"] == big
    for call in (first, second):
        argv = call["argv"]
        assert "--system" not in argv
        assert not Path(argv[argv.index("--system-file") + 1]).exists()  # (the session's end removed it)
