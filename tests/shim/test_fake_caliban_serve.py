"""The fake `caliban mcp serve` (tests/support/fake_caliban_serve.py) held to the drive surface's spec
(fixtures/drive/caliban-drive-surface.md, read off caliban's source): a double the drive backend
is tested against is only as good as its likeness. Raw JSON-RPC lines here, no client library."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support_fixtures import FIXTURES
from support_processes import FAKE_CALIBAN

SPEC = (FIXTURES / "drive" / "caliban-drive-surface.md").read_text()
TOOLS = ["caliban_permit", "caliban_poll", "caliban_run", "caliban_send_input", "caliban_status"]


class Server:
    """The fake as a process, spoken to line by line."""

    def __init__(self, script: dict[str, Any] | None = None, *flags: str) -> None:
        env = {**os.environ, "FAKE_SERVE_SCRIPT": json.dumps(script or {})}
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE_CALIBAN), *flags, "mcp", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        self.id = 0

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def line(self) -> bytes:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg).encode() + b"\n")
        answer: dict[str, Any] = json.loads(self.line())
        assert answer["id"] == self.id and answer["jsonrpc"] == "2.0"
        return answer

    def initialize(self) -> dict[str, Any]:
        got = self.request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                          "clientInfo": {"name": "test", "version": "0"}})  # fmt: skip
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return got

    def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        """(isError, the one text block) of a tool call."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})["result"]
        (block,) = result["content"]
        assert block["type"] == "text" and "structuredContent" not in result
        return result["isError"], block["text"]

    def body(self, tool: str, **arguments: Any) -> dict[str, Any]:
        is_error, text = self.call(tool, **arguments)
        assert not is_error, text
        assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        body: dict[str, Any] = json.loads(text)
        return body

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(10)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
    s.proc.wait()


def drain(
    server: Server, run_id: str, cursor: int = 0, until: tuple[str, ...] = ("done",), sent: bool = False
) -> tuple[list[Any], int, dict[str, Any]]:
    """Poll by the spec's drain rule: past a status in `until`, until a poll brings nothing new.
    `sent`: input was just sent, and the status may still say `awaiting_input` until the run
    takes it (session.rs: ChannelInputProvider): wait for it to be running, or for events."""
    events: list[Any] = []
    seen, armed = False, not sent
    for _ in range(2000):
        body = server.body("caliban_poll", run_id=run_id, cursor=cursor)
        events += body["events"]
        cursor = body["next_cursor"]
        armed = armed or bool(body["events"]) or body["status"]["state"] == "running"
        if seen and not body["events"]:
            return events, cursor, body
        seen = armed and body["status"]["state"] in until
        time.sleep(0.005)
    raise AssertionError("never settled")


def test_initialize_lists_five_tools_sorted_with_their_arguments(server: Server) -> None:
    result = server.initialize()["result"]
    assert result["serverInfo"] == {"name": "rmcp", "version": "1.7.0"} and "rmcp 1.7" in SPEC
    assert result["capabilities"] == {"tools": {}} and result["instructions"].startswith("Drive a caliban agent")
    assert result["protocolVersion"] == "2025-03-26"  # an older client's version, echoed
    listed = server.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in listed] == TOOLS == sorted(re.findall(r"^\| `(caliban_\w+)` \|", SPEC, re.M))
    schemas = {t["name"]: t["inputSchema"] for t in listed}
    for row in re.findall(r"^\| `(caliban_\w+)` \| (.+?) \|", SPEC, re.M):
        tool, args = row
        named = re.findall(r"`(\w+)(\??)(?::[^`]*)?`", args)
        assert set(schemas[tool]["properties"]) == {n for n, _ in named}, tool
        optional = {n for n, q in named if q} | {n for n in re.findall(r"`(\w+): \w+ = ", args)}
        assert set(schemas[tool]["required"]) == {n for n, _ in named} - optional, tool


def test_framing_errors_as_rmcp_answers_them(server: Server) -> None:
    server.initialize()
    server.send(b"{not json\n")
    parse = json.loads(server.line())
    assert parse["error"]["code"] == -32700 and parse["id"] is None
    assert server.request("no/such")["error"]["code"] == -32601
    assert server.request("tools/call", {"arguments": {}})["error"]["code"] == -32601
    assert server.request("tools/call", {"name": "caliban_nope", "arguments": {}})["error"] == {
        "code": -32602, "message": "tool not found"}  # fmt: skip
    bad = server.request("tools/call", {"name": "caliban_run", "arguments": {}})["error"]
    assert bad["code"] == -32602 and bad["message"].startswith("failed to deserialize parameters: ")
    assert server.close() == 0  # stdin closed: the server ends with 0


def test_anything_but_ping_before_initialize_ends_the_server() -> None:
    s = Server()
    assert s.request("ping")["result"] == {}
    s.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}\n')
    assert s.proc.wait(10) == 1 and "ends the server (exit\n  1)" in SPEC


def test_error_texts_are_the_sources(server: Server) -> None:
    server.initialize()
    errors = [
        server.call("caliban_poll", run_id="run-9"),
        server.call("caliban_send_input", run_id="run-9"),
        server.call("caliban_permit", run_id="run-9", tool_use_id="t", allow=True),
    ]
    assert errors == [(True, "unknown run_id: run-9"), (True, "send_input requires `text` or `end: true`"),
                      (True, "unknown run_id: run-9")]  # fmt: skip
    assert "send_input requires `text` or `end: true`" in SPEC and "unknown run_id: X" in SPEC
    once = server.body("caliban_run", prompt="hi")["run_id"]
    assert re.fullmatch(r"run-\d+", once)
    assert server.call("caliban_send_input", run_id=once, text="more")[1].startswith(
        "cannot send input: drive session is not interactive"
    )
    assert server.call("caliban_permit", run_id=once, tool_use_id="t", allow=True) == (
        True, "no pending permission request for this run")  # fmt: skip
    drain(server, once)
    assert server.call("caliban_send_input", run_id=once, end=True, text="x")[1].startswith("cannot send input: ")
    for text in ("no pending permission request for this run", "unknown run_id: ", "cannot send input: drive session"):
        assert text in SPEC


def test_an_interactive_run_its_prompts_and_its_one_run_end() -> None:
    script = {"messages": [
        {"turns": [{"text": "Counting.", "tools": [{"name": "Read", "input": {"path": "a"}, "result": "x"},
                                                  {"name": "Bash", "input": {"command": "touch d"}},
                                                  {"name": "Bash", "input": {"command": "touch e"}}]},
                   {"text": "Done."}]},
        {"turns": [{"text": "Second."}]}]}  # fmt: skip
    s = Server(script, "--model", "m-1")
    try:
        s.initialize()
        run_id = s.body("caliban_run", prompt="go", interactive=True)["run_id"]
        cursor, prompts, events = 0, [], []
        while len(prompts) < 2:
            body = s.body("caliban_poll", run_id=run_id, cursor=cursor)
            events += body["events"]
            cursor = body["next_cursor"]
            ask = body["permission_request"]
            if ask is not None:
                assert body["status"] == {"state": "running"}  # a prompt does not change the status
                assert s.body("caliban_poll", run_id=run_id, cursor=cursor)["permission_request"] == ask  # repeats
                names = [e["event"]["type"] for e in events]
                assert names[-2:] == ["ToolCallStart", "ToolCallInputDelta"] or names[-1] == "ToolCallEnd"
                prompts.append(ask)
                if len(prompts) == 1:
                    assert s.call("caliban_permit", run_id=run_id, tool_use_id="other", allow=True) == (
                        True, f"no pending permission with tool_use_id other; current prompt is {ask['tool_use_id']}")  # fmt: skip
                    assert s.body("caliban_permit", run_id=run_id, tool_use_id=ask["tool_use_id"], allow=True) == {"ok": True}
                else:
                    s.body("caliban_permit", run_id=run_id, tool_use_id=ask["tool_use_id"], allow=False, reason="no e")
            time.sleep(0.005)
        assert [p["tool_name"] for p in prompts] == ["Bash", "Bash"]  # Read is never asked
        assert prompts[0]["input"] == {"command": "touch d"}
        # The status turns awaiting_input before the message's last event is in: the drain rule.
        ahead = False
        for _ in range(2000):
            body = s.body("caliban_poll", run_id=run_id, cursor=cursor)
            events += body["events"]
            cursor = body["next_cursor"]
            if body["status"]["state"] == "awaiting_input":
                ahead = not any(e["event"]["type"] == "TurnEnd" and e["event"]["turn_index"] == 1 for e in events)
                break
        assert ahead
        more, cursor, _ = drain(s, run_id, cursor, until=("awaiting_input",))
        events += more
        assert all(e["v"] == 1 and list(e) == ["event", "v"] for e in events)
        ends = [e["event"] for e in events if e["event"]["type"] == "ToolCallEnd"]
        assert [(e["is_error"], e["content"][0]["text"]) for e in ends] == [
            (False, "x"), (False, "done"), (True, "Tool call denied: no e")]
        assert all(list(e["event"]) == sorted(e["event"]) for e in events)  # serde_json::Value: keys sorted
        assert {e["event"]["model"] for e in events if e["event"]["type"] == "TurnStart"} == {"m-1"}
        assert s.body("caliban_send_input", run_id=run_id, text="again") == {"ok": True}
        more, cursor, _ = drain(s, run_id, cursor, until=("awaiting_input",), sent=True)
        assert [e["event"]["turn_index"] for e in more if e["event"]["type"] == "TurnStart"] == [2]  # keeps counting
        assert s.body("caliban_send_input", run_id=run_id, end=True) == {"ok": True}
        more, cursor, last = drain(s, run_id, cursor)
        assert [e["event"]["type"] for e in more] == ["RunEnd"] and last["status"] == {"state": "done"}
        assert [e["event"]["type"] for e in events + more].count("RunEnd") == 1
        assert s.call("caliban_send_input", run_id=run_id, text="late") == (
            True, "cannot send input: drive session has ended; it accepts no further input")
    finally:
        s.proc.kill()
        s.proc.wait()


def test_an_unanswered_prompt_is_denied_and_stays_pending() -> None:
    """The 600 s deny (here shortened), its text, and the known bug: the stale prompt stays."""
    assert "No answer in **600 s** → denied (`…did not respond within 600s`)" in SPEC
    s = Server({"permit_timeout": 0.3, "messages": [{"turns": [{"tools": [{"name": "Bash", "input": {}}]}]}]})
    try:
        s.initialize()
        run_id = s.body("caliban_run", prompt="go")["run_id"]
        events, cursor = [], 0
        for _ in range(2000):
            body = s.body("caliban_poll", run_id=run_id, cursor=cursor)
            events += body["events"]
            cursor = body["next_cursor"]
            if any(e["event"]["type"] == "ToolCallEnd" for e in events):
                break
            time.sleep(0.01)
        (end,) = [e["event"] for e in events if e["event"]["type"] == "ToolCallEnd"]
        assert end["is_error"] and end["result_text"] == (
            "Tool call denied: permission denied for tool 'Bash': drive client did not respond within 0s")
        stale = s.body("caliban_poll", run_id=run_id, cursor=cursor)["permission_request"]
        assert stale is not None
        assert s.call("caliban_permit", run_id=run_id, tool_use_id=stale["tool_use_id"], allow=True) == (
            True, "run is no longer waiting on that prompt")
    finally:
        s.proc.kill()
        s.proc.wait()


def test_global_flags_before_the_subcommand_and_a_caliban_without_it() -> None:
    env = {**os.environ, "FAKE_CALIBAN_NO_SERVE": "1"}
    old = subprocess.run([sys.executable, str(FAKE_CALIBAN), "mcp", "serve"], capture_output=True, env=env, timeout=30)
    assert old.returncode == 2 and b"unexpected argument 'serve'" in old.stderr
    late = subprocess.run([sys.executable, str(FAKE_CALIBAN), "mcp", "serve", "--model", "m"], capture_output=True, timeout=30,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert late.returncode == 2
