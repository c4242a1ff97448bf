"""Recorded wire replays: the stdin of every real TS SDK session with the real CLI 2.1.333
(fixtures/cc-2.1.333/sdk-ts) fed to `caliban-claude` (served in this process, support_inprocess's
`Served`) as the SDK fed it (a next message after a result, an interrupt mid-run, EOF once the
results are in), with the fake caliban answering the same conversation; the shim's stdout
compared frame by frame with the CLI's (uuids, times, paths and the values caliban's own run
decides aside), and every frame parsed by the Python SDK."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk._internal.message_parser import parse_message
from support_fixtures import FIXTURES
from support_inprocess import Served
from support_processes import fake_caliban

WIRES = FIXTURES / "cc-2.1.333" / "sdk-ts"
SCRIPTS = FIXTURES / "caliban"
TWO_TURNS, TEXT = {"file": "tool_use_two_turns.jsonl"}, {"file": "benign_text.jsonl"}
# The caliban runs (one per user message) that answer each recorded conversation.
RUNS: dict[str, list[dict[str, Any]]] = {
    "partial": [{"file": "tool_use_two_turns.partial.jsonl"}],
    "interrupt": [{"file": "tool_use_two_turns.partial.jsonl", "pause_after": 3}, TEXT],
    "interrupt_tool": [{**TWO_TURNS, "pause_after": 1}, TEXT],
    "max_turns_1": [{"file": "max_turns.jsonl"}],
    "stream_two_users": [TEXT, TEXT], "resume": [TEXT, TEXT], "persist_false": [TEXT],
    "system_prompt_string": [TEXT], "system_prompt_preset_append": [TEXT],
    "mcp_stdio": [TEXT], "mcp_stdio_argv": [TEXT],
}  # fmt: skip
# Where the shim's frames are not the CLI's, and why (the README's table of the shim says it too).
DIFFERENT = {
    "can_use_tool": "no can_use_tool requests: caliban -p has no permission callback",
    "can_use_tool_default_mode": "no can_use_tool requests: caliban -p has no permission callback",
    "can_use_tool_deny_interrupt": "no can_use_tool requests: caliban -p has no permission callback",
    "hooks_pretooluse": "no hook_callback requests: caliban -p cannot call SDK hooks",
    "interrupt_tool": "caliban prints a turn's frames when the turn ends: one interrupted in its tool shows none",
    "settings_argv": "caliban reports no permission denials (no system/permission_denied frames)",
    "settings_initialize": "caliban reports no permission denials (no system/permission_denied frames)",
    "mcp_stdio": "the MCP tool call is caliban's to make: the fake answers in text",
    "mcp_stdio_argv": "the MCP tool call is caliban's to make: the fake answers in text",
}
# What the CLI prints that the app never sees (the SDK consumes it) or that only 2.1.333 has.
HOST_ONLY = ("control_response", "control_request")
NEWER = ("written_at",)  # 2.1.333 writes it; the shim does not yet
# Keys the CLI has that the translation does not give (yet): the partial assistant message of
# an interrupted turn is `aborted: true` in Claude Code, its message_stop lists `abandoned_blocks`.
MISSING = {"interrupt": ("aborted", "abandoned_blocks")}
NAMES = sorted(p.name.removesuffix(".wire.jsonl") for p in WIRES.glob("*.wire.jsonl"))


def processes(name: str) -> list[list[dict[str, Any]]]:
    """The recorded events of each CLI process of a scenario, in order."""
    by_proc: dict[int, list[dict[str, Any]]] = {}
    for line in (WIRES / f"{name}.wire.jsonl").read_text().splitlines():
        event = json.loads(line)
        by_proc.setdefault(event["proc"], []).append(event)
    return list(by_proc.values())


def visible(frame: dict[str, Any]) -> bool:
    """A frame the app sees (the SDK hides control frames and session state)."""
    return frame.get("type") not in HOST_ONLY and not frame.get("sdk_host_only")


def kind(frame: dict[str, Any]) -> str:
    sub = frame.get("subtype")
    if frame["type"] == "stream_event":
        return "stream_event"
    return f"{frame['type']}/{sub}" if sub else frame["type"]


class Replay:
    """The shim run with a recorded argv (in this process, as its process would be), its output read as frames."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.stderr: list[str] = []
        self.proc = Served(argv, env, Path.cwd(), self.stderr.append)
        self.frames: list[dict[str, Any]] = []

    def until(self, done: Any, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, ("replay stalled", [kind(f) for f in self.frames])
            line = self.proc.line(max(deadline - time.monotonic(), 0.01))
            assert line, ("the shim ended early", [kind(f) for f in self.frames], self.stderr)
            self.frames.append(json.loads(line))

    def results(self) -> int:
        return sum(f["type"] == "result" for f in self.frames)

    def write(self, message: dict[str, Any]) -> None:
        self.proc.send(json.dumps(message).encode() + b"\n")

    def feed(self, events: list[dict[str, Any]]) -> int:
        """stdin as the SDK wrote it: a next message only after the last one's result, an
        interrupt once the run is under way, EOF once every message has its result."""
        users = 0
        for event in events:
            if event["dir"] == "stdin":
                message = event["data"]
                if message.get("type") == "user":
                    self.until(lambda n=users: self.results() >= n)
                    users += 1
                elif message.get("request", {}).get("subtype") == "interrupt":
                    self.until(lambda n=users: sum(f.get("subtype") == "init" for f in self.frames) >= n)
                    time.sleep(0.3)  # caliban is in the middle of its run (the fake pauses there)
                self.write(message)
            elif event["dir"] == "stdin_eof":
                self.until(lambda n=users: self.results() >= n)
                self.proc.end()
        self.frames += [json.loads(line) for line in self.proc.rest()]  # to its end
        return self.proc.wait(timeout=20)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    wrapper = fake_caliban(tmp_path)
    return {**os.environ, "CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
            "FAKE_CALIBAN_LOG": str(tmp_path / "calls.jsonl"), "CALIBAN_CLAUDE_ARGS": "",
            "FAKE_CALIBAN_NO_SERVE": "1"}  # the -p backend (the recordings' callbacks go unanswered here)  # fmt: skip


def replay(name: str, env: dict[str, str]) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]], int, int]]:
    """Each process: the CLI's frames, the shim's, the CLI's exit status, the shim's."""
    runs = [{**r, "file": str(SCRIPTS / r["file"])} for r in RUNS.get(name, [TWO_TURNS])]
    env = {**env, "FAKE_CALIBAN_SCRIPTS": json.dumps(runs)}
    out: list[tuple[list[dict[str, Any]], list[dict[str, Any]], int, int]] = []
    session = ""
    for events in processes(name):
        argv = next(e["data"] for e in events if e["dir"] == "argv")
        recorded_session = next((e["data"]["session_id"] for e in events if e["dir"] == "stdout"
                                 and e["data"].get("subtype") == "init"), "")  # fmt: skip
        argv = [a.replace(recorded_session, session) if session and a.startswith("--resume") else a for a in argv]
        shim = Replay(argv, env)
        status = shim.feed(events)
        cli = [e["data"] for e in events if e["dir"] == "stdout"]
        exit_status = next(e["data"] for e in events if e["dir"] == "exit")
        out.append((cli, shim.frames, exit_status, status))
        session = next((f["session_id"] for f in shim.frames if f.get("subtype") == "init"), "")
    return out


@pytest.mark.parametrize("name", NAMES)
def test_replay(name: str, env: dict[str, str]) -> None:
    for cli, shim, cli_status, shim_status in replay(name, env):
        # The initialize answer: the same request, and every `*_applied` key the CLI gave.
        (answer,) = [f for f in shim if f["type"] == "control_response" and "commands" in f["response"].get("response", {})]
        (recorded,) = [f for f in cli if f["type"] == "control_response" and "commands" in f["response"].get("response", {})]
        assert answer["response"]["request_id"] == recorded["response"]["request_id"]
        applied = {k: v for k, v in recorded["response"]["response"].items() if k.endswith("_applied")}
        got = {k: v for k, v in answer["response"]["response"].items() if k.endswith("_applied")}
        if name == "hooks_pretooluse":
            assert applied == {"hooks_applied": True} and got == {"hooks_applied": False}  # said, not pretended
        else:
            assert {k: got.get(k) for k in applied} == applied
        for frame in shim:  # every frame parses as the Python SDK reads it
            if visible(frame) and frame["type"] != "stream_event":
                parse_message(frame)
        want = [f for f in cli if visible(f) and f.get("subtype") not in ("session_state_changed", "status")]
        have = [f for f in shim if visible(f) and f.get("subtype") not in ("session_state_changed", "status")]
        if name in DIFFERENT:
            assert kind(have[0]) == "system/init" and kind(have[-1]).startswith("result/")
        else:
            assert [kind(f) for f in have if kind(f) != "stream_event"] == [
                kind(f) for f in want if kind(f) != "stream_event"
            ]
            assert shim_status == cli_status
        # Frame by frame, the same keys in the same order (the values are caliban's run's): each
        # kind of frame (a stream event by its event's type) against the CLI's first of that kind.
        theirs = {}
        for frame in reversed(want):
            theirs[shape(frame)] = frame
        for ours in have if name not in DIFFERENT else have[:1]:
            if shape(ours) in theirs:
                skip = NEWER + MISSING.get(name, ())
                assert list(ours) == [k for k in theirs[shape(ours)] if k not in skip], shape(ours)


def shape(frame: dict[str, Any]) -> str:
    event = frame.get("event")
    return f"stream_event/{event.get('type')}" if isinstance(event, dict) else kind(frame)
