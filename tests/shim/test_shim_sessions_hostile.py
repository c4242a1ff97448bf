"""Session ids an app's user gave, through the installed command and the real Python SDK over
its own subprocess transport (it writes `--session-id=ID`, `--resume=ID`): an id that is no
UUID (`../x`, an absolute path, a fork's `../../victim`) is refused with Claude Code's line and
nothing outside the config and sessions folders changes, nor inside them (issue 37: a
transcript was written anywhere the user could write; a fork overwrote `victim.json`); and a
session file whose last line was cut (a crash mid-write) resumed and read back whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, get_session_messages, query
from support_fixtures import FIXTURES
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
INVALID = "Error: Invalid session ID. Must be a valid UUID."


def options(root: Path, lines: list[str], fixture: str = "benign_text.jsonl", **kw: Any) -> ClaudeAgentOptions:
    env = {"CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
           "CLAUDE_CONFIG_DIR": str(root / "claude"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / fixture)}])}  # fmt: skip
    return ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(root / "work"), stderr=lines.append, **kw)


async def run(root: Path, **kw: Any) -> tuple[list[Any], list[str], BaseException | None]:
    lines: list[str] = []
    messages: list[Any] = []
    try:
        async for message in query(prompt="hi", options=options(root, lines, **kw)):
            messages.append(message)
    except Exception as exc:  # (the SDK's ProcessError: the CLI exited 1)
        return messages, lines, exc
    return messages, lines, None


def everything(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("given", [
    {"session_id": "../x"},
    {"session_id": "/ABS/x"},
    {"session_id": "../../victim", "fork_session": True, "resume": "FIRST"},
    {"session_id": "/ABS/victim", "fork_session": True, "resume": "FIRST"},
])  # fmt: skip
async def test_an_id_that_is_a_path_is_refused_and_nothing_is_written(tmp_path: Path, given: dict[str, Any]) -> None:
    (tmp_path / "work").mkdir()
    fake_caliban(tmp_path)
    first, _, failed = await run(tmp_path)
    assert failed is None and isinstance(first[-1], ResultMessage)
    (tmp_path / "victim.json").write_text('{"name": "victim"}')
    (tmp_path / "x.jsonl").write_text("mine\n")
    kw = {k: str(v).replace("FIRST", first[-1].session_id).replace("/ABS", str(tmp_path)) for k, v in given.items()}
    kw = {k: (v == "True" if k == "fork_session" else v) for k, v in kw.items()}
    before = everything(tmp_path)
    messages, lines, failed = await run(tmp_path, **kw)
    assert failed is not None and not [m for m in messages if isinstance(m, ResultMessage)]
    assert INVALID in lines
    assert everything(tmp_path) == before  # nothing written, nothing overwritten, in or out of the folders


async def test_a_resumed_session_whose_last_line_was_cut_reads_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))  # (for the SDK's reader, in this process)
    (tmp_path / "work").mkdir()
    fake_caliban(tmp_path)
    first, _, failed = await run(tmp_path, fixture="tool_use_two_turns.jsonl")
    assert failed is None and isinstance(first[-1], ResultMessage)
    (path,) = (tmp_path / "claude").rglob("*.jsonl")
    data = path.read_bytes()
    path.write_bytes(data + data.splitlines(keepends=True)[-1][:40])  # a crash mid-line
    again, _, failed = await run(tmp_path, fixture="tool_use_two_turns.jsonl", resume=first[-1].session_id)
    assert failed is None and again[-1].session_id == first[-1].session_id
    got = get_session_messages(first[-1].session_id, directory=str(tmp_path / "work"))
    turn = ["user", "assistant", "assistant", "user", "assistant"]
    assert [m.type for m in got] == turn + turn  # 4 of 10 before: the first new line went with the cut one
    assert all(json.loads(line) for line in path.read_bytes().splitlines())
