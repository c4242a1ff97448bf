"""A run with partial messages writes the same session file as one without (issue 40): with
`--include-partial-messages` caliban prints deltas and no message frames, and the headless
reader ended every such turn with an empty message, so the session file had the prompt and no
assistant line (`get_session_messages` gave the user's message alone)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, get_session_messages
from support_fixtures import FIXTURES
from support_inprocess import printed, queried
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
# A line's fields that differ from run to run (ids, times) or by the stream's kind (none else may).
VARYING = {"uuid", "parentUuid", "timestamp", "sessionId", "leafUuid", "id", "requestId", "promptId", "cwd"}
# Each partial fixture and the same conversation without partial messages.
PAIRS = [("tool_use_two_turns.partial", "tool_use_two_turns"), ("thinking_partial.partial", "thinking")]


def normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def print_run(root: Path, fixture: str, *flags: str) -> tuple[list[Any], bytes]:
    """The session file `caliban-claude -p` writes for one run of `fixture`, its varying fields
    gone, and what it printed."""
    root.mkdir()
    config = root / "claude"
    env = {**os.environ, "CALIBAN_BIN": str(fake_caliban(root)), "CLAUDE_CONFIG_DIR": str(config),
           "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / f"{fixture}.jsonl")}])}  # fmt: skip
    work = root / "work"
    work.mkdir()
    argv = ["-p", "how many files are here?", "--output-format", "stream-json", "--verbose", *flags]
    done = printed(argv, env, work)
    assert done.returncode == 0, done.stderr
    (path,) = config.glob("projects/*/*.jsonl")
    return [normal(json.loads(line)) for line in path.read_text().splitlines()], done.stdout.encode()


def kinds(frames: bytes) -> list[str]:
    """Each frame's type (a stream event's own), a run of the same one once."""
    got = [f["event"]["type"] if f["type"] == "stream_event" else f["type"] for f in map(json.loads, frames.splitlines())]
    return [k for i, k in enumerate(got) if i == 0 or got[i - 1] != k]


@pytest.mark.parametrize(("partial", "whole"), PAIRS)
def test_partial_messages_write_the_session_file_of_the_whole_stream(tmp_path: Path, partial: str, whole: str) -> None:
    streamed, _ = print_run(tmp_path / "partial", partial, "--include-partial-messages")
    assert streamed == print_run(tmp_path / "whole", whole)[0]
    assert [line["type"] for line in streamed if line["type"] == "assistant"]  # it has the answer


def test_an_sdk_session_with_partial_messages_reads_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))  # where get_session_messages looks
    env = {"CALIBAN_BIN": str(fake_caliban(tmp_path)), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
           "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.partial.jsonl")}])}  # fmt: skip
    options = ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(tmp_path), include_partial_messages=True)

    async def main() -> str:
        sid = ""
        async for message in queried("how many files are here?", options):
            if isinstance(message, ResultMessage):
                sid = message.session_id
        return sid

    sid = asyncio.run(main())
    messages = get_session_messages(sid, directory=str(tmp_path))
    got = [(m.type, [b["type"] for b in m.message["content"]] if isinstance(m.message["content"], list) else "text")
           for m in messages]  # fmt: skip
    assert got == [("user", "text"), ("assistant", ["text"]), ("assistant", ["tool_use"]), ("user", ["tool_result"]),
                   ("assistant", ["text"])]  # fmt: skip
    assert messages[-1].message["content"] == [{"text": "There are 3 files.", "type": "text"}]


def test_a_streamed_tool_turn_closes_its_message_before_the_results_as_the_cli(tmp_path: Path) -> None:
    _, printed = print_run(tmp_path / "run", "tool_use_two_turns.partial", "--include-partial-messages")
    # the CLI's own frames of this conversation (its input's deltas are more: runs count once)
    assert kinds(printed) == kinds((FIXTURES / "claude-code" / "partial_messages.stream.jsonl").read_bytes())
