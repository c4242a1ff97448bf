"""`caliban-claude` keeps each session's file where Claude Code does ($CLAUDE_CONFIG_DIR/projects/
<slug of the cwd>/<session>.jsonl): an app on the real Python Agent SDK lists its sessions and reads
a conversation back (and the TypeScript SDK's readers the same files), a resumed session reads as
one, ccusage counts the result frames' usage, and --no-session-persistence writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, get_session_messages, list_sessions
from support_fixtures import FIXTURES, SUPPORT
from support_inprocess import in_process, queried
from support_processes import fake_caliban

from translator.transcripts.files import slug

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
SESSIONS = SUPPORT / "ts_sdk" / "sessions.mjs"
PROMPT = "how many files are here?"
TOOL_TURN = [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"), ("assistant", "text")]


class App:
    """An SDK app in its own working directory, on a fake caliban, with its own config dir."""

    def __init__(self, root: Path) -> None:
        self.root, self.work, self.config = root, root / "work", root / "claude"
        self.work.mkdir()
        fake_caliban(root)

    def options(self, script: str = "tool_use_two_turns.jsonl", **kw: Any) -> ClaudeAgentOptions:
        env = {"CALIBAN_BIN": str(self.root / "caliban"), "CALIBAN_SESSIONS_DIR": str(self.root / "sessions"),
               "CLAUDE_CONFIG_DIR": str(self.config),
               "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / script)}])}  # fmt: skip
        return ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(self.work), **kw)

    def files(self) -> list[Path]:
        return sorted(self.config.rglob("*.jsonl")) if self.config.exists() else []


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    made = App(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(made.config))  # where this test's readers look
    return made


async def ask(prompt: str, options: ClaudeAgentOptions) -> ResultMessage:
    messages = [m async for m in queried(prompt, options)]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    return result


def blocks(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, b["type"]) for m in messages for b in (m.message["content"] if isinstance(m.message["content"], list)
                                                           else [{"type": "text"}])]  # fmt: skip


async def test_an_app_lists_its_session_and_reads_the_conversation_back(app: App) -> None:
    result = await ask(PROMPT, app.options())
    (path,) = app.files()
    assert path == app.config / "projects" / slug(str(app.work)) / f"{result.session_id}.jsonl"
    (info,) = list_sessions(directory=str(app.work))
    assert (info.session_id, info.summary, info.first_prompt, info.cwd) == (result.session_id, PROMPT, PROMPT, str(app.work))
    messages = get_session_messages(result.session_id, directory=str(app.work))
    assert blocks(messages) == TOOL_TURN
    assert messages[0].message["content"] == PROMPT  # as the app sent it: a string
    assert messages[3].message["content"][0]["content"] == [{"text": "3", "type": "text"}]
    assert messages[-1].message["content"][0]["text"] == "There are 3 files." == result.result


async def test_a_resumed_session_goes_on_in_its_file_and_reads_as_one(app: App) -> None:
    first = await ask(PROMPT, app.options())
    again = await ask("and now?", app.options(resume=first.session_id))
    assert again.session_id == first.session_id
    assert len(app.files()) == 1
    messages = get_session_messages(first.session_id)
    assert blocks(messages) == TOOL_TURN + TOOL_TURN
    assert [m.message["content"] for m in messages if m.type == "user" and isinstance(m.message["content"], str)] == \
        [PROMPT, "and now?"]  # fmt: skip
    (info,) = list_sessions()
    assert (info.first_prompt, info.summary) == (PROMPT, "and now?")  # the last prompt, as Claude Code's


async def test_no_session_persistence_writes_no_file(app: App) -> None:
    result = await ask(PROMPT, app.options(extra_args={"no-session-persistence": None}))
    assert result.result == "There are 3 files."
    assert app.files() == []


async def test_ccusage_counts_the_result_frames_usage(app: App, ccusage: Any) -> None:
    results = [await ask(PROMPT, app.options()), await ask("once more", app.options("thinking.jsonl"))]
    keys = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
            "cacheCreationTokens": "cache_creation_input_tokens", "cacheReadTokens": "cache_read_input_tokens"}  # fmt: skip
    report, daily = ccusage(app.config, "session"), ccusage(app.config, "daily")
    assert len(report["session"]) == 2
    for ours, theirs in keys.items():
        assert report["totals"][ours] == daily["totals"][ours] == sum((r.usage or {}).get(theirs, 0) for r in results), ours
    assert report["totals"]["outputTokens"] > 0


async def test_the_typescript_sdk_reads_the_shims_sessions(app: App, sdk: Path) -> None:
    result = await ask(PROMPT, app.options())
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(app.config)}
    done = subprocess.run(["node", str(SESSIONS), str(sdk), str(app.work)], capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    (info,) = read["inDir"]
    assert (info["sessionId"], info["firstPrompt"], info["cwd"]) == (result.session_id, PROMPT, str(app.work))
    messages = read["messages"][result.session_id]
    kinds = [(m["type"], b["type"]) for m in messages for b in (m["message"]["content"] if isinstance(m["message"]["content"], list)
                                                                else [{"type": "text"}])]  # fmt: skip
    assert kinds == TOOL_TURN


async def test_the_drive_backend_writes_the_same_kind_of_file(app: App, ccusage: Any) -> None:
    """An app with can_use_tool runs on `caliban mcp serve`: its runs (raw events, usage per turn) too."""
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    async def gate(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultDeny(message="no e") if "e.txt" in str(tool_input) else PermissionResultAllow()

    touch = [{"name": "Bash", "input": {"command": f"touch {n}.txt"}, "id": f"toolu_{n}"} for n in "de"]
    script = {"messages": [{"turns": [{"text": "Making them.", "tools": touch}, {"text": "Made d.txt."}]}]}
    options = app.options(can_use_tool=gate)
    options.env.update(FAKE_SERVE_SCRIPT=json.dumps(script), FAKE_SERVE_LOG=str(app.root / "serve.jsonl"))
    async with in_process(options) as client:
        await client.query("make d and e")
        messages = [m async for m in client.receive_response()]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.result == "Made d.txt."
    read = get_session_messages(result.session_id)
    assert blocks(read) == [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("assistant", "tool_use"),
                            ("user", "tool_result"), ("user", "tool_result"), ("assistant", "text")]  # fmt: skip
    allowed, denied = read[4].message["content"]  # the turn's results, one message as caliban keeps them
    assert (allowed["tool_use_id"], allowed["is_error"], denied["tool_use_id"], denied["is_error"]) == (
        "toolu_d", False, "toolu_e", True)  # fmt: skip
    report = ccusage(app.config, "session")["totals"]
    usage = result.usage or {}
    assert (report["inputTokens"], report["outputTokens"]) == (usage["input_tokens"], usage["output_tokens"])
    assert (report["cacheReadTokens"], report["cacheCreationTokens"]) == (
        usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"])  # fmt: skip


async def test_an_interrupted_run_is_said_in_the_file_as_claude_code_says_it(app: App) -> None:
    from claude_agent_sdk import SystemMessage

    options = app.options()
    options.env["FAKE_CALIBAN_SCRIPTS"] = json.dumps([
        {"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl"), "pause_after": 2},
        {"file": str(FIXTURES / "caliban" / "benign_text.jsonl")}])  # fmt: skip
    options.env["FAKE_CALIBAN_LOG"] = str(app.root / "calls.jsonl")  # (the scripts are taken in turn)
    async with in_process(options) as client:
        await client.query(PROMPT)
        async for message in client.receive_response():
            if isinstance(message, SystemMessage) and message.subtype == "init":
                await client.interrupt()
        await client.query("hi")
        result = [m async for m in client.receive_response()][-1]
    said = [(m.type, m.message["content"] if isinstance(m.message["content"], str) else m.message["content"][0].get("text"))
            for m in get_session_messages(result.session_id)]  # fmt: skip
    assert said[0] == ("user", PROMPT) and ("user", "[Request interrupted by user]") in said
    assert said[-2:] == [("user", "hi"), ("assistant", "ok")]
    (info,) = list_sessions()
    assert (info.first_prompt, info.summary) == (PROMPT, "hi")
