"""Resume, continue and fork on the drive backend (`caliban mcp serve`, for an app with
`can_use_tool` or hooks: every Zed session): caliban's drive surface takes each prompt as text
only and keeps its sessions in memory, so the earlier messages cannot reach caliban there. The
shim says so, plainly, for the session that lost them, and not for a new one (issue 40)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, PermissionResultAllow, ResultMessage
from support_inprocess import in_process
from support_processes import fake_caliban

from translator.shim.session import DRIVE_NO_HISTORY
from translator.transcripts.files import session_path

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
EARLIER = "e2222222-2222-4222-8222-222222222222"


async def allow(name: str, tool_input: dict[str, Any], context: Any) -> Any:
    return PermissionResultAllow()


def options(root: Path, lines: list[str], **kw: Any) -> ClaudeAgentOptions:
    env = {"CALIBAN_BIN": str(root / "caliban"), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
           "CLAUDE_CONFIG_DIR": str(root / "claude"), "FAKE_SERVE_LOG": str(root / "serve.jsonl"),
           "FAKE_SERVE_SCRIPT": json.dumps({"messages": [{"turns": [{"text": "ok"}]}]})}  # fmt: skip
    return ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(root), can_use_tool=allow, stderr=lines.append, **kw)


async def ask(opts: ClaudeAgentOptions) -> ResultMessage:
    async with in_process(opts) as client:
        await client.query("and now?")
        messages = [m async for m in client.receive_response()]
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


@pytest.mark.parametrize("kw", [{"resume": EARLIER}, {"resume": EARLIER, "fork_session": True}],
                         ids=["resume", "fork"])  # fmt: skip
async def test_a_resumed_session_on_the_drive_backend_says_what_it_lost(tmp_path: Path, kw: dict[str, Any]) -> None:
    fake_caliban(tmp_path)
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / f"{EARLIER}.json").write_text(json.dumps({"name": EARLIER, "messages": ["before"]}))
    kept = Path(session_path(str(tmp_path / "claude"), str(tmp_path), EARLIER))
    kept.parent.mkdir(parents=True)
    kept.touch()  # its Claude Code file: what says the session exists (sessions.py)
    lines: list[str] = []
    result = await ask(options(tmp_path, lines, **kw))
    assert result.result == "ok" and (tmp_path / "serve.jsonl").exists()  # it ran on caliban mcp serve
    assert [line for line in lines if "earlier messages" in line] == [f"caliban-claude: warning: {DRIVE_NO_HISTORY}"]


async def test_a_new_session_on_the_drive_backend_says_nothing_of_history(tmp_path: Path) -> None:
    fake_caliban(tmp_path)
    lines: list[str] = []
    result = await ask(options(tmp_path, lines))
    assert result.result == "ok" and (tmp_path / "serve.jsonl").exists()
    assert not [line for line in lines if "earlier messages" in line]
