"""`caliban-claude` where the world is careless (issue 32): stdout on a full disk in print mode, a
prompt that is no UTF-8, a system prompt too large for a command line. The installed command as
a real process (the TypeScript Agent SDK under node for the system prompt), the fake caliban
(tests/fake_caliban.py) behind it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
FAKE = Path(__file__).with_name("fake_caliban.py")
DRIVE = Path(__file__).with_name("ts_sdk") / "drive.mjs"
SDK_ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    wrapper = tmp_path / "caliban"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(0o755)
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
