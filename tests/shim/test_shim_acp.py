"""Zed's ACP adapters from npm driving `caliban-claude` (`CLAUDE_CODE_EXECUTABLE`), as an editor
runs them (tests/support/acp_client.py is the editor): `@zed-industries/claude-agent-acp` 0.23.1
(caliban's built-in tools, permissions through `session/request_permission`, cancel) and
`@zed-industries/claude-code-acp` 0.16.2, whose in-process `acp` MCP server reads and writes
the editor's files (`mcp__acp__Read` → `fs/read_text_file`; shared/reference/cc-2.1.333/acp/)
and runs Bash in the editor's terminal (`mcp__acp__Bash` → `terminal/create`, once permitted).
Skipped, and said so, where node is not installed."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient
from support_fixtures import npm_installed
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ADAPTERS = {"@zed-industries/claude-agent-acp": "0.23.1", "@zed-industries/claude-code-acp": "0.16.2"}
CACHE = Path(os.environ.get("CALIBAN_CLAUDE_ACP_CACHE") or Path.home() / ".cache" / "caliban-claude-acp")
SKIPPED = "the ACP adapter tests were SKIPPED: node and npm are not installed (.ci/run installs them)"


@pytest.fixture(scope="module")
def adapters() -> dict[str, Path]:
    """Each adapter's entry (its `bin`), installed once into the cache."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip(SKIPPED)
    modules = npm_installed(CACHE, ADAPTERS)
    return {package: modules / package / "dist" / "index.js" for package in ADAPTERS}


@pytest.fixture
def editor(tmp_path: Path) -> Iterator[Any]:
    """Start an adapter as an editor would, in a workspace with a.txt; closed at the end."""
    clients: list[AcpClient] = []
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    wrapper = fake_caliban(tmp_path)

    def start(entry: Path, env: dict[str, str], kind: type[AcpClient] = AcpClient) -> AcpClient:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        full = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                "CLAUDE_CODE_EXECUTABLE": SHIM, "CALIBAN_BIN": str(wrapper),
                "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"), "FAKE_SERVE_LOG": str(tmp_path / "serve.jsonl"),
                "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl"), **env}  # fmt: skip
        client = kind(["node", str(entry)], full, work)
        clients.append(client)
        return client

    yield start, work, tmp_path
    for client in clients:
        client.close()


def permits(root: Path) -> list[dict[str, Any]]:
    path = root / "serve.jsonl"
    log = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e["in"]["params"]["arguments"] for e in log if e.get("in", {}).get("params", {}).get("name") == "caliban_permit"]


def test_claude_agent_acp_gets_a_session_a_prompt_and_a_permission(adapters: dict[str, Path], editor: Any) -> None:
    start, work, root = editor
    read = {"name": "Read", "input": {"file_path": str(work / "a.txt")}, "id": "toolu_read", "result": "a"}
    touch = {"name": "Bash", "input": {"command": "touch d.txt"}, "id": "toolu_d"}
    script = {"messages": [{"turns": [{"text": "Looking.", "tools": [read, touch]}, {"text": "Made d.txt."}]}]}
    client = start(adapters["@zed-industries/claude-agent-acp"], {"FAKE_SERVE_SCRIPT": json.dumps(script)})
    session = client.start()
    models = client.session["models"]  # (it read models[0].value: with none, session/new failed)
    assert models["currentModelId"] == "default"
    assert [m["modelId"] for m in models["availableModels"]][:4] == ["default", "sonnet", "opus", "haiku"]
    answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "make d"}]})
    assert answer.get("result", {}).get("stopReason") == "end_turn", answer
    (asked,) = [p for m, p in client.asked if m == "session/request_permission"]
    assert asked["sessionId"] == session and asked["toolCall"]["toolCallId"] == "toolu_d"
    assert permits(root) == [{"run_id": "run-1", "tool_use_id": "toolu_d", "allow": True}]
    chunks = "".join(u["update"]["content"].get("text", "") for u in client.updates
                     if u["update"].get("sessionUpdate") == "agent_message_chunk")  # fmt: skip
    assert "Made d.txt." in chunks


def test_claude_agent_acp_cancel_ends_the_prompt_cancelled(adapters: dict[str, Path], editor: Any) -> None:
    start, _, _ = editor
    script = {"delay": 0.3, "messages": [{"turns": [{"text": "one two three four five six seven eight"}, {"text": "late"}]}]}
    client = start(adapters["@zed-industries/claude-agent-acp"], {"FAKE_SERVE_SCRIPT": json.dumps(script)})
    session = client.start()
    mid = client.next_id
    client._send({"jsonrpc": "2.0", "id": mid, "method": "session/prompt",
                  "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}})  # fmt: skip
    client.next_id += 1
    deadline = time.monotonic() + 30
    while not any(u["update"].get("sessionUpdate") == "agent_message_chunk" for u in client.updates):
        assert time.monotonic() < deadline, client.updates
        time.sleep(0.02)
    client.notify("session/cancel", {"sessionId": session})
    while mid not in client.answers:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert client.answers[mid].get("result", {}).get("stopReason") == "cancelled", client.answers[mid]


def test_claude_code_acp_reads_and_writes_the_editors_files_through_its_mcp_server(adapters: dict[str, Path], editor: Any) -> None:
    """0.16.2 gives caliban its `acp` server (an SDK MCP server, relayed): Read goes to the
    editor's fs/read_text_file unasked (allowedTools), Write asks session/request_permission."""
    start, work, root = editor
    calls = [{"tool": "mcp__acp__Read", "input": {"file_path": str(work / "a.txt")}, "id": "toolu_read"},
             {"tool": "mcp__acp__Write", "input": {"file_path": str(work / "d.txt"), "content": "d\n"}, "id": "toolu_w"}]  # fmt: skip
    env = {"FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": calls, "text": "Read a, wrote d."}])}
    client = start(adapters["@zed-industries/claude-code-acp"], env)
    session = client.start(fs_write=True)
    answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "copy"}]})
    assert answer.get("result", {}).get("stopReason") == "end_turn", answer
    methods = [m for m, _ in client.asked]
    assert methods == ["fs/read_text_file", "session/request_permission", "fs/write_text_file"], client.asked
    assert client.asked[0][1]["path"] == str(work / "a.txt")
    assert client.written == {str(work / "d.txt"): "d\n"}
    (run,) = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    allowed = [run["argv"][n + 1] for n, arg in enumerate(run["argv"]) if arg == "--allow"]
    assert {"mcp__acp__Read", "mcp__acp__Write"} <= set(allowed) and not [a for a in allowed if "*" in a]  # the relay settles each


@pytest.mark.parametrize("choice", ["allow", "reject"])
def test_claude_code_acp_runs_bash_in_the_editors_terminal_after_request_permission(
    adapters: dict[str, Path], editor: Any, choice: str
) -> None:
    """An editor with a terminal (Zed's): 0.16.2 disallows caliban's own Bash and gives its
    `mcp__acp__Bash`, relayed on caliban -p; not in its allowedTools, so the relay asks
    `can_use_tool`, the adapter asks session/request_permission, and only an allow runs the
    command, in the editor's terminal (terminal/create). A reject (the adapter's deny with
    `interrupt: true`) ends the run as Claude Code ends it (the call rejected,
    `error_during_execution`/`aborted_tools`, cc-2.1.333/sdk-ts/can_use_tool_deny_interrupt),
    which the adapter answers as an internal error, with Claude Code's `errors`."""
    start, work, root = editor
    bash = {"tool": "mcp__acp__Bash", "input": {"command": "echo made > d.txt", "timeout": 5000}, "id": "toolu_sh"}
    env = {"FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": [bash], "text": "Ran it."}])}
    client = start(adapters["@zed-industries/claude-code-acp"], env)
    client.permission = choice
    session = client.start(terminal=True)
    answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "make d"}]})
    if choice == "allow":
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
    else:
        assert answer["error"]["message"] == "Internal error: [ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"
    methods = [m for m, _ in client.asked]
    ran = ["terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"]
    assert methods == ["session/request_permission", *(ran if choice == "allow" else [])], client.asked
    called = client.asked[0][1]["toolCall"]["toolCallId"]  # the relay's id for it (caliban names a call once it returned)
    assert (work / "d.txt").exists() is (choice == "allow")
    (run,) = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    denied = [run["argv"][n + 1] for n, a in enumerate(run["argv"]) if a == "--deny"]
    assert "Bash" in denied  # caliban's own Bash: the adapter's disallowedTools
    updates = json.dumps([u["update"] for u in client.updates if u["update"].get("toolCallId") == called])
    assert ("Exited with code 0." if choice == "allow" else "The user doesn't want to proceed with this tool use") in updates


class LateEditor(AcpClient):
    """An editor whose user cancels the prompt while asked about a tool, and whose permission
    dialog answers Allow afterwards anyway (issue 37: the Bash command ran in the terminal
    after session/cancel)."""

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method != "session/request_permission":
            return super()._answer(method, params)
        self.asked.append((method, params))
        self.notify("session/cancel", {"sessionId": params["sessionId"]})
        time.sleep(0.5)  # the adapter has interrupted the run by now
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}


def test_claude_code_acp_runs_nothing_allowed_after_session_cancel(adapters: dict[str, Path], editor: Any) -> None:
    """On caliban -p (the relayed mcp__acp__Bash), an Allow that comes after session/cancel runs
    nothing, neither this call nor the run's next: the run ends cancelled."""
    start, work, _ = editor
    bash = {"tool": "mcp__acp__Bash", "input": {"command": "echo made > d.txt", "timeout": 5000}, "id": "toolu_sh"}
    env = {"FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": [bash, {**bash, "id": "toolu_sh2"}], "text": "Ran it."}])}
    client = start(adapters["@zed-industries/claude-code-acp"], env, LateEditor)
    session = client.start(terminal=True)
    answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "make d"}]})
    assert answer.get("result", {}).get("stopReason") == "cancelled", answer
    time.sleep(1.0)  # nothing comes late either
    assert [m for m, _ in client.asked] == ["session/request_permission"], client.asked  # no terminal/create
    assert not (work / "d.txt").exists()


def test_claude_agent_acp_permits_nothing_allowed_after_session_cancel(adapters: dict[str, Path], editor: Any) -> None:
    """The same on the drive backend: caliban is never told to run the Bash command allowed late."""
    start, _, root = editor
    touch = {"name": "Bash", "input": {"command": "touch d.txt"}, "id": "toolu_d"}
    script = {"messages": [{"turns": [{"text": "Making.", "tools": [touch, {**touch, "id": "toolu_e"}]}, {"text": "Made."}]}]}
    client = start(adapters["@zed-industries/claude-agent-acp"], {"FAKE_SERVE_SCRIPT": json.dumps(script)}, LateEditor)
    session = client.start()
    answer = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "make d"}]})
    assert answer.get("result", {}).get("stopReason") == "cancelled", answer
    time.sleep(1.0)
    assert [m for m, _ in client.asked] == ["session/request_permission"], client.asked
    assert not [p for p in permits(root) if p["allow"]], permits(root)
