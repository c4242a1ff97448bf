"""A session that exists only as its Claude Code file is resumed from it, as the CLI resumes it
and sends its history (issue 40): an SDK `fork_session()` copy, a session store's file (the SDK
writes it into a config dir of its own and runs the CLI there), the real CLI's file copied from
another machine. caliban is given the file's conversation as a session of its own, in its
message format (crates/caliban-sessions `PersistedSession`, caliban-provider `Message`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    InMemorySessionStore,
    ResultMessage,
    fork_session,
    get_session_messages,
    project_key_for_directory,
)
from support_fixtures import FIXTURES
from support_inprocess import printed, queried
from support_processes import fake_caliban

from translator.shim import history
from translator.transcripts.files import slug

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
PROMPT = "how many files are here?"
TOOL_TURN = [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"), ("assistant", "text")]
RECORDED = FIXTURES / "cc-2.1.333" / "sessions"
RECORDED_ID = "dd42277e-47d0-48b2-bfe7-2be8b573f366"  # resume_plain's session: "hi", then "what is 2+2?"

# tool_use_two_turns as caliban holds it: the history a resumed copy must carry
TOOL_HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "I'll count the files."},
        {"type": "tool_use", "id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq", "name": "Bash", "input": {"command": "ls | wc -l"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01Ab3CdE4fGh5iJk6LmN7oPq",
                                  "content": [{"type": "text", "text": "3"}], "is_error": False}]},
    {"role": "assistant", "content": [{"type": "text", "text": "There are 3 files."}]},
]  # fmt: skip
RECORDED_HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Hello! How can I help?"}]},
    {"role": "user", "content": [{"type": "text", "text": "what is 2+2?"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "2 + 2 = 4."}]},
]


class App:
    """An SDK app in its own working directory, on a fake caliban, with its own config dir."""

    def __init__(self, root: Path) -> None:
        self.root, self.work, self.config, self.store = root, root / "work", root / "claude", root / "sessions"
        self.work.mkdir()
        fake_caliban(root)

    def env(self) -> dict[str, str]:
        return {"CALIBAN_BIN": str(self.root / "caliban"), "CALIBAN_SESSIONS_DIR": str(self.store),
                "CLAUDE_CONFIG_DIR": str(self.config), "FAKE_CALIBAN_LOG": str(self.root / "log.jsonl"),
                "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}  # fmt: skip

    def options(self, **kw: Any) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(cli_path=SHIM, env=self.env(), cwd=str(self.work), **kw)

    def caliban(self, sid: str) -> Any:
        """caliban's session (the fake appends each run's prompt to the messages it was given)."""
        return json.loads((self.store / f"{sid}.json").read_text())

    def copied(self, source: Path, sid: str) -> Path:
        """`source` copied in as the session file `sid` of this folder, as from another machine."""
        folder = self.config / "projects" / slug(str(self.work))
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copyfile(source, folder / f"{sid}.jsonl"))

    def shim(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env(), "PATH": os.environ["PATH"], "HOME": str(self.root)}
        return printed(["-p", *argv], env, self.work)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    made = App(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(made.config))
    return made


async def ask(prompt: str, options: ClaudeAgentOptions) -> ResultMessage:
    messages = [m async for m in queried(prompt, options)]
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


def blocks(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, b["type"]) for m in messages
            for b in (m.message["content"] if isinstance(m.message["content"], list) else [{"type": "text"}])]  # fmt: skip


async def test_an_sdk_fork_session_copy_is_resumed_with_its_history(app: App) -> None:
    first = await ask(PROMPT, app.options())
    fork = fork_session(first.session_id).session_id  # the SDK's own copy: a file, nothing of caliban's
    assert not (app.store / f"{fork}.json").exists()
    again = await ask("and now?", app.options(resume=fork))
    assert (again.session_id, again.is_error, again.result) == (fork, False, "There are 3 files.")
    assert app.caliban(fork)["messages"] == [*TOOL_HISTORY, "and now?"]
    # the new lines chained to the copy's conversation, not to the title line the SDK wrote after it
    assert blocks(get_session_messages(fork)) == TOOL_TURN + TOOL_TURN
    assert app.caliban(first.session_id)["messages"] == [PROMPT]  # the source is caliban's own, untouched


def test_the_real_clis_file_copied_from_another_machine_is_resumed(app: App) -> None:
    app.copied(RECORDED / "resume_plain.jsonl", RECORDED_ID)
    done = app.shim("--resume", RECORDED_ID, "--output-format", "json", "and now?")
    assert (done.returncode, json.loads(done.stdout)["session_id"]) == (0, RECORDED_ID), done.stderr
    made = app.caliban(RECORDED_ID)
    assert made["messages"] == [*RECORDED_HISTORY, "and now?"]
    assert (made["name"], made["model"], made["created_at"]) == (RECORDED_ID, "claude-opus-5-5", "2026-12-02T01:53:47.736Z")
    (run,) = [json.loads(line) for line in (app.root / "log.jsonl").read_text().splitlines()]
    assert run["argv"][run["argv"].index("--resume") + 1] == RECORDED_ID


def test_continue_takes_a_folders_file_that_caliban_never_had(app: App) -> None:
    app.copied(RECORDED / "resume_plain.jsonl", RECORDED_ID)
    done = app.shim("--continue", "--output-format", "json", "and now?")
    assert (done.returncode, json.loads(done.stdout)["session_id"]) == (0, RECORDED_ID), done.stderr
    assert app.caliban(RECORDED_ID)["messages"] == [*RECORDED_HISTORY, "and now?"]


def test_a_copied_file_resumed_without_persistence_leaves_nothing_behind(app: App) -> None:
    path = app.copied(RECORDED / "resume_plain.jsonl", RECORDED_ID)
    before = path.read_bytes()
    done = app.shim("--resume", RECORDED_ID, "--no-session-persistence", "--output-format", "json", "and now?")
    assert (done.returncode, json.loads(done.stdout)["is_error"]) == (0, False), done.stderr
    assert not app.store.exists() and path.read_bytes() == before


async def test_a_session_stores_session_is_resumed_from_the_file_the_sdk_writes(app: App) -> None:
    first = await ask(PROMPT, app.options())
    (path,) = app.config.rglob("*.jsonl")
    store = InMemorySessionStore()  # another machine's store: nothing of this one's caliban
    key = {"project_key": project_key_for_directory(str(app.work)), "session_id": first.session_id}
    await store.append(key, [json.loads(line) for line in path.read_bytes().splitlines()])  # type: ignore[arg-type]
    shutil.rmtree(app.store)
    again = await ask("and now?", app.options(resume=first.session_id, session_store=store))
    assert (again.session_id, again.is_error) == (first.session_id, False)
    assert app.caliban(first.session_id)["messages"] == [*TOOL_HISTORY, "and now?"]


def test_a_call_without_its_result_and_blocks_caliban_has_no_form_for_are_left_out() -> None:
    lines = (RECORDED / "agent_print.jsonl").read_bytes().splitlines()
    conversation, dropped = history.messages(history.chain(lines))
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in conversation] == [
        ("user", ["text"]), ("assistant", ["text", "tool_use"]), ("user", ["tool_result"]), ("assistant", ["text"])]
    assert dropped == 0
    cut = lines[: next(n for n, line in enumerate(lines) if b'"tool_result"' in line)]  # a crash before the result
    conversation, _ = history.messages(history.chain([*cut, b'{"type":"assistant","uuid":"x"', b"not json"]))
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in conversation] == [("user", ["text"]), ("assistant", ["text"])]
    redacted = [json.dumps({"type": "user", "uuid": "u", "message": {"content": "hi"}}).encode(),
                json.dumps({"type": "assistant", "uuid": "a", "parentUuid": "u", "message": {"content": [
                    {"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "yes"}]}}).encode()]  # fmt: skip
    assert history.messages(history.chain(redacted)) == (
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
         {"role": "assistant", "content": [{"type": "text", "text": "yes"}]}], 1)  # fmt: skip
