"""`--format claude-code` reports what `claude -p` would: the session id a script resumes with, the exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, SCENARIOS, frames_of
from support_processes import run

from translator.api import translate_bytes

SAMPLES = FIXTURES / "samples"  # the shared caliban samples, as the repository has them
TWO_TURNS = SAMPLES / "headless-upstream-encoding-of-translator-fixtures" / "tool_use_two_turns.jsonl"
TWO_USERS = SAMPLES / "headless-derived-from-code" / "run_frames_two_users.ndjson"


def agent_ids(path: Path) -> list[str]:
    """The session ids the agent's own init frames state, in order."""
    return [f["session_id"] for f in frames_of(path.read_bytes()) if f.get("subtype") == "init"]


def ids(frames: list[dict[str, Any]]) -> list[str]:
    return [f["session_id"] for f in frames if "session_id" in f]


def test_headless_input_keeps_the_agents_session_id() -> None:
    assert agent_ids(TWO_TURNS) == ["SESSION"]
    for options in ([], ["--include-partial-messages"], ["--results-only"]):
        frames = frames_of(run("--format", "claude-code", *options, str(TWO_TURNS)).stdout)
        assert [f["type"] for f in frames][-1] == "result"
        assert set(ids(frames)) == {"SESSION"} and len(ids(frames)) == len(frames), options


def test_the_users_session_id_still_wins() -> None:
    frames = frames_of(run("--format", "claude-code", "--session-id", "mine", str(TWO_TURNS)).stdout)
    assert set(ids(frames)) == {"mine"} and len(ids(frames)) == len(frames)


def test_each_run_carries_the_id_its_init_states() -> None:
    stream = TWO_TURNS.read_bytes() + TWO_USERS.read_bytes()
    frames = frames_of(run("--format", "claude-code", stdin=stream).stdout)
    first = next(i for i, f in enumerate(frames) if f["type"] == "result") + 1
    assert agent_ids(TWO_USERS) == ["test-session"]
    assert set(ids(frames[:first])) == {"SESSION"} and set(ids(frames[first:])) == {"test-session"}
    assert [f["type"] for f in frames].count("result") == 2 and frames[-1]["result"] == "beta"


def test_the_api_keeps_the_agents_id_unless_given_one() -> None:
    data = TWO_TURNS.read_bytes()
    assert set(ids(frames_of(b"".join(translate_bytes(data, "claude-code"))))) == {"SESSION"}
    assert set(ids(frames_of(b"".join(translate_bytes(data, "claude-code", session_id="S"))))) == {"S"}


def captured_status(name: str) -> int:
    """`claude -p`'s exit status, as its capture of the conversation records it."""
    text = (FIXTURES / "claude-code" / f"{name}.cmd.txt").read_text()
    return int(next(line for line in text.splitlines() if line.startswith("# Exit status:")).split(":")[1])


@pytest.mark.parametrize("name", SCENARIOS)
def test_exit_status_in_claude_code_format_is_claude_codes(name: str) -> None:
    events = str(FIXTURES / f"{name}.events.jsonl")
    assert run("--format", "claude-code", "--exit-status", events).returncode == captured_status(name)


def test_exit_status_in_the_default_format_stays_the_agents() -> None:
    events = str(FIXTURES / "max_turns.events.jsonl")
    assert (captured_status("max_turns"), run("--exit-status", events).returncode) == (1, 75)
    empty = run("--format", "claude-code", "--exit-status", stdin=b"")
    assert (empty.returncode, empty.stderr) == (66, b"translator: --exit-status: the input held no run\n")
