"""Zed's ACP adapters' sessions on `caliban-claude` (issue 40), as an editor uses them after a
restart: a conversation had in one adapter process, then, in a new one, `session/list` (its id
and title), `session/load` (its history replayed as the adapter reads it from the session
file), `session/resume` and `session/fork` (the adapter's `resume` + `forkSession`), each
followed by a prompt.

`@zed-industries/claude-agent-acp` 0.23.1 gives the SDK `can_use_tool` and a hook, so its
sessions run on the drive backend (`caliban mcp serve`), where a conversation's earlier messages
cannot reach caliban: the shim says so in one line, pinned here. `@zed-industries/claude-code-acp`
0.16.2 brings its SDK MCP server, so its sessions run on `caliban -p`, which carries them: caliban's
session holds the earlier prompt; so does claude-agent-acp's with CALIBAN_CLAUDE_BACKEND=print (its
callbacks then not called). Both stream partial messages, always. Skipped where node is
not installed (the adapters are installed as tests/shim/test_shim_acp.py installs them)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient
from support_fixtures import FIXTURES, npm_installed
from support_processes import fake_caliban

from translator.shim.choose import DRIVE_NO_HISTORY
from translator.transcripts.files import slug

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
AGENT, CODE = "@zed-industries/claude-agent-acp", "@zed-industries/claude-code-acp"
ADAPTERS = {AGENT: "0.23.1", CODE: "0.16.2"}
CACHE = Path(os.environ.get("CALIBAN_CLAUDE_ACP_CACHE") or Path.home() / ".cache" / "caliban-claude-acp")
PROMPT, LATER = "how many files are here?", "and now?"
# The drive's answer to every message: a Read (allowed by caliban's default rules), then the answer.
READ = {"name": "Read", "input": {"file_path": "a.txt"}, "id": "toolu_read", "result": "a"}
SERVE = {"messages": [{"turns": [{"text": "I'll look.", "tools": [READ]}, {"text": "There is a.txt."}]}]}
# caliban -p's: the recorded two-turn run, streamed (Zed's adapters always ask for partial messages).
PRINT = [{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.partial.jsonl")}]
ANSWERS = {"drive": ("I'll look.", "There is a.txt.", "toolu_read"),
           "print": ("I'll count the files.", "There are 3 files.", "toolu_01Ab3CdE4fGh5iJk6LmN7oPq")}  # fmt: skip
# Each adapter on the backend it reaches: its own (claude-agent-acp's callbacks: the drive; claude-code-acp's
# SDK server: caliban -p), and claude-agent-acp on caliban -p too, forced (CALIBAN_CLAUDE_BACKEND=print).
RUNS = [(AGENT, "drive"), (AGENT, "print"), (CODE, "print")]


@pytest.fixture(scope="module")
def adapters() -> dict[str, Path]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the ACP adapter tests were SKIPPED: node and npm are not installed (.ci/run installs them)")
    modules = npm_installed(CACHE, ADAPTERS)
    return {package: modules / package / "dist" / "index.js" for package in ADAPTERS}


class Editor:
    """Zed, restarted between the steps: each `start` is a new adapter process on the same
    home, workspace and caliban stores; the shim's stderr is kept (the adapters drop it)."""

    def __init__(self, root: Path, entry: Path, adapter: str, backend: str) -> None:
        self.root, self.entry, self.adapter, self.backend = root, entry, adapter, backend
        self.work = root / "work"
        self.work.mkdir()
        (self.work / "a.txt").write_text("a\n")
        self.home = root / "home"
        self.home.mkdir()
        self.stderr = root / "shim.stderr"
        shim = root / "caliban-claude"
        shim.write_text(f'#!/bin/sh\nexec "{SHIM}" "$@" 2>>"{self.stderr}"\n')
        shim.chmod(0o755)
        self.env = {**os.environ, "HOME": str(self.home), "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
                    "CLAUDE_CODE_EXECUTABLE": str(shim), "CALIBAN_BIN": str(fake_caliban(root)),
                    "CALIBAN_SESSIONS_DIR": str(root / "sessions"), "FAKE_SERVE_SCRIPT": json.dumps(SERVE),
                    "FAKE_CALIBAN_SCRIPTS": json.dumps(PRINT), "FAKE_CALIBAN_LOG": str(root / "calls.jsonl")}  # fmt: skip
        if adapter == AGENT and backend == "print":
            self.env["CALIBAN_CLAUDE_BACKEND"] = "print"
        self.clients: list[AcpClient] = []

    def start(self) -> AcpClient:
        client = AcpClient(["node", str(self.entry)], self.env, self.work)
        self.clients.append(client)
        init = client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}})
        assert "result" in init, init
        return client

    def prompt(self, client: AcpClient, session: str, text: str) -> None:
        answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]})
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer

    def first(self) -> str:
        """The conversation of the first run: its session id."""
        client = self.start()
        new = client.request("session/new", {"cwd": str(self.work), "mcpServers": []})
        session = str(new["result"]["sessionId"])
        self.prompt(client, session, PROMPT)
        client.close()
        return session

    def session_file(self, session: str) -> list[dict[str, Any]]:
        path = self.home / ".claude" / "projects" / slug(str(self.work)) / f"{session}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def said(self) -> list[str]:
        return self.stderr.read_text().splitlines() if self.stderr.exists() else []

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture(params=RUNS, ids=[f"{adapter.split('/')[1]}-{backend}" for adapter, backend in RUNS])
def editor(request: pytest.FixtureRequest, adapters: dict[str, Path], tmp_path: Path) -> Iterator[Editor]:
    adapter, backend = request.param
    made = Editor(tmp_path, adapters[adapter], adapter, backend)
    yield made
    made.close()


def exchange(backend: str, prompt: str) -> list[tuple[str, Any]]:
    """One message and its answer, as the session file holds them (see `conversation`)."""
    first, answer, _ = ANSWERS[backend]
    return [("user", prompt), ("assistant", first), ("assistant", ["tool_use"]), ("user", ["tool_result"]),
            ("assistant", answer)]  # fmt: skip


def texts(client: AcpClient, kind: str) -> list[str]:
    return [u["update"]["content"].get("text", "") for u in client.updates if u["update"].get("sessionUpdate") == kind]


def conversation(lines: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """A session file's messages as (role, its text, or the types of its blocks but text), in order."""
    said: list[tuple[str, Any]] = []
    for line in lines:
        if line.get("type") in ("user", "assistant"):
            content = line["message"]["content"]
            if not isinstance(content, str) and all(b["type"] == "text" for b in content):
                content = "".join(b["text"] for b in content)
            said.append((line["type"], content if isinstance(content, str) else [b["type"] for b in content]))
    return said


def test_session_list_names_the_conversation_by_its_first_prompt(editor: Editor) -> None:
    session = editor.first()
    listed = editor.start().request("session/list", {"cwd": str(editor.work)})["result"]["sessions"]
    assert [(s["sessionId"], s["title"], s["cwd"]) for s in listed] == [(session, PROMPT, str(editor.work))]


def test_session_load_replays_the_history_and_goes_on(editor: Editor) -> None:
    session = editor.first()
    client = editor.start()
    loaded = client.request("session/load", {"sessionId": session, "cwd": str(editor.work), "mcpServers": []})
    assert "result" in loaded, loaded
    first, answer, call = ANSWERS[editor.backend]
    assert texts(client, "user_message_chunk") == [PROMPT]
    assert texts(client, "agent_message_chunk") == [first, answer]
    assert [u["update"]["toolCallId"] for u in client.updates if u["update"].get("sessionUpdate") == "tool_call"] == [call]
    editor.prompt(client, session, LATER)
    assert conversation(editor.session_file(session)) == exchange(editor.backend, PROMPT) + exchange(editor.backend, LATER)
    reached(editor, session)


def test_session_resume_goes_on_with_the_same_session(editor: Editor) -> None:
    session = editor.first()
    client = editor.start()
    resumed = client.request("session/resume", {"sessionId": session, "cwd": str(editor.work), "mcpServers": []})
    assert "result" in resumed, resumed
    assert not texts(client, "user_message_chunk")  # (resume replays nothing: load does)
    editor.prompt(client, session, LATER)
    assert conversation(editor.session_file(session)) == exchange(editor.backend, PROMPT) + exchange(editor.backend, LATER)
    reached(editor, session)


def test_session_fork_starts_a_new_session_with_the_history(editor: Editor) -> None:
    session = editor.first()
    client = editor.start()
    forked = client.request("session/fork", {"sessionId": session, "cwd": str(editor.work), "mcpServers": []})
    fork = str(forked["result"]["sessionId"])
    assert fork != session
    editor.prompt(client, fork, LATER)
    assert conversation(editor.session_file(fork)) == exchange(editor.backend, PROMPT) + exchange(editor.backend, LATER)
    assert {line["sessionId"] for line in editor.session_file(fork) if "sessionId" in line} == {fork}
    assert conversation(editor.session_file(session)) == exchange(editor.backend, PROMPT)  # the source as it was
    reached(editor, fork)


def reached(editor: Editor, session: str) -> None:
    """What caliban was given of the earlier messages: on caliban -p, its session holds them (the
    fake caliban records each run's prompt); on the drive, nothing, and the shim says so."""
    if editor.backend == "drive":
        assert editor.said().count(f"caliban-claude: warning: {DRIVE_NO_HISTORY}") == 1
    else:
        held = json.loads((editor.root / "sessions" / f"{session}.json").read_text())["messages"]
        assert held == [PROMPT, LATER]
        assert DRIVE_NO_HISTORY not in "\n".join(editor.said())
