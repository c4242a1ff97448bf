"""The drive backend under a hostile `caliban mcp serve` and a careless app (issue 32): a provider
that reuses a tool_use_id, a hook that never answers, an app that closes its input while a
question is open, a server that stops reading its input, one that floods answers to ids never
sent, one with a bad `next_cursor`. The shim, driven by the real Python Agent SDK (in this
process, support_inprocess.py) or, installed, over its pipes with the raw protocol, in front of the fake server (tests/support/fake_caliban_serve.py's
hostile flags); after each, no server is left running."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, PermissionResultAllow, ResultMessage
from support_inprocess import in_process
from support_processes import Frames, fake_caliban, peak_rss_kb, running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ARGV = [SHIM, "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
        "--permission-prompt-tool", "stdio"]  # fmt: skip
TOUCH_D = {"name": "Bash", "input": {"command": "touch d.txt"}, "id": "toolu_d"}
ONE_TOOL = {"messages": [{"turns": [{"text": "Making d.", "tools": [TOUCH_D]}, {"text": "Made d."}]}]}


def environment(root: Path, script: dict[str, Any], **extra: str) -> dict[str, str]:
    return {"CALIBAN_BIN": str(fake_caliban(root)), "CALIBAN_SESSIONS_DIR": str(root / "sessions"),
            "FAKE_SERVE_SCRIPT": json.dumps(script), "FAKE_SERVE_LOG": str(root / "serve.jsonl"), **extra}  # fmt: skip


def served(root: Path) -> list[dict[str, Any]]:
    path = root / "serve.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def servers(root: Path) -> list[int]:
    return [e["pid"] for e in served(root) if "pid" in e]


def permits(root: Path) -> list[dict[str, Any]]:
    return [e["in"]["params"]["arguments"] for e in served(root)
            if e.get("in", {}).get("params", {}).get("name") == "caliban_permit"]  # fmt: skip


def gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(running(p) for p in pids)


@pytest.fixture
def reaped(tmp_path: Path) -> Any:
    """A failing test leaves no fake server behind."""
    yield tmp_path
    for pid in servers(tmp_path):
        if running(pid):
            os.kill(pid, 9)


class Allow:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, name: str, tool_input: dict[str, Any], context: Any) -> Any:
        self.calls.append(context.tool_use_id)
        return PermissionResultAllow()


async def conversation(options: ClaudeAgentOptions, *prompts: str, timeout: float = 30) -> list[list[Any]]:
    """Each prompt's messages, up to its result (a hang fails the test at `timeout`)."""
    out: list[list[Any]] = []
    async with in_process(options) as client:
        for prompt in prompts:
            await client.query(prompt)
            out.append(await asyncio.wait_for(_response(client), timeout))
    return out


async def _response(client: ClaudeSDKClient) -> list[Any]:
    return [m async for m in client.receive_response()]


def options(root: Path, script: dict[str, Any], env: dict[str, str] | None = None, **kw: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(cli_path=SHIM, env=environment(root, script, **(env or {})), **kw)


# ---------------------------------------------------------------- a tool_use_id used again


async def test_a_tool_use_id_reused_in_a_later_turn_is_asked_again(reaped: Path) -> None:
    """A provider that gives a later turn's call the same tool_use_id: its prompt is a new one
    (the first was settled at its ToolCallEnd), asked and permitted, not left to the 600 s deny."""
    again = {"messages": [{"turns": [{"tools": [TOUCH_D]}, {"tools": [TOUCH_D]}, {"text": "Twice."}]}]}
    asked = Allow()
    started = time.monotonic()
    (messages,) = await conversation(options(reaped, again, can_use_tool=asked), "touch d twice", timeout=20)
    assert asked.calls == ["toolu_d", "toolu_d"]
    assert [p["tool_use_id"] for p in permits(reaped)] == ["toolu_d", "toolu_d"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.result, result.is_error) == ("Twice.", False)
    assert time.monotonic() - started < 15
    assert gone(servers(reaped))


# ---------------------------------------------------------------- a hook that never answers


async def hangs(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {}


@pytest.mark.parametrize("where", ["matcher", "environment"])
async def test_a_hook_that_hangs_is_given_its_timeout_then_the_tool_goes_on(reaped: Path, where: str) -> None:
    """HookMatcher(timeout=2), or CALIBAN_CLAUDE_HOOK_TIMEOUT for a matcher without one (Claude
    Code's default is 60 s): past it the hook is cancelled (control_cancel_request), said on
    stderr, and the tool goes on to the next step (here can_use_tool), as Claude Code's
    non-blocking hook error does."""
    timeout = {"timeout": 2} if where == "matcher" else {}
    env = {"CALIBAN_CLAUDE_HOOK_TIMEOUT": "2"} if where == "environment" else {}
    lines: list[str] = []
    asked = Allow()
    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[hangs], **timeout)]}  # type: ignore[arg-type]
    started = time.monotonic()
    (messages,) = await conversation(
        options(reaped, ONE_TOOL, env, hooks=hooks, can_use_tool=asked, stderr=lines.append), "make d", timeout=20
    )
    took = time.monotonic() - started
    assert asked.calls == ["toolu_d"] and permits(reaped)[0]["allow"] is True
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "Made d."
    assert 2 <= took < 10
    assert any("PreToolUse hook" in line and "2 s" in line for line in lines), lines
    assert gone(servers(reaped))


# ---------------------------------------------------------------- the raw protocol


class Raw:
    """The shim over pipes (the raw protocol), in front of the fake server."""

    def __init__(self, root: Path, script: dict[str, Any], argv: list[str | bytes] | None = None, **env: str) -> None:
        self.root = root
        self.proc = subprocess.Popen(argv or ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **environment(root, script, **env)})  # fmt: skip
        assert self.proc.stdout is not None
        self.stdout = Frames(self.proc.stdout.fileno())
        self.send({"type": "control_request", "request_id": "init", "request": {"subtype": "initialize"}})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def user(self, text: str) -> None:
        self.send({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None})

    def until(self, done: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Frames up to and including the first for which `done(frame)`."""
        return self.stdout.until(done, timeout)

    def finish(self, timeout: float = 20.0) -> tuple[int | None, bytes, bytes]:
        """Close stdin and wait: the status (None: still running at `timeout`), the rest of stdout, stderr."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
            return self.proc.returncode, self.stdout.rest + out, err
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            return None, self.stdout.rest + out, err


def is_question(frame: dict[str, Any]) -> bool:
    return frame["type"] == "control_request" and frame["request"]["subtype"] == "can_use_tool"


def results(raw: bytes) -> list[dict[str, Any]]:
    return [f for f in map(json.loads, raw.splitlines()) if f["type"] == "result"]


def test_the_app_closing_its_input_while_a_question_is_open_ends_shim_and_server(reaped: Path) -> None:
    """No answer can come once the app's input has ended: the open question is denied (fail
    closed), so is every later one, the message gets its result, and shim and server exit."""
    shim = Raw(reaped, ONE_TOOL)
    shim.user("make d")
    shim.until(is_question)
    started = time.monotonic()
    status, out, err = shim.finish(timeout=15)
    took = time.monotonic() - started
    assert status == 0, ("the shim did not exit" if status is None else status, err)
    (result,) = results(out)
    assert result["permission_denials"][0]["tool_use_id"] == "toolu_d"
    assert permits(reaped) == [{"run_id": "run-1", "tool_use_id": "toolu_d", "allow": False,
                                "reason": "the app closed its input: no answer can come"}]  # fmt: skip
    assert took < 5
    assert gone(servers(reaped))


def test_a_later_call_after_the_app_closed_its_input_is_denied_unasked(reaped: Path) -> None:
    """The app that gates its calls closes its input while the run's first call is asked: that
    call is denied, and so is the run's next one, which the rules (`Bash(echo:*)`) would have
    allowed: no call runs once the app cannot say no, and the app is asked nothing more."""
    echo = {"name": "Bash", "input": {"command": "echo hi"}, "id": "toolu_e"}
    script = {"messages": [{"turns": [{"text": "Making d.", "tools": [TOUCH_D, echo]}, {"text": "Made d."}]}]}
    shim = Raw(reaped, script, [*ARGV, "--allowedTools", "Bash(echo:*)"])
    shim.user("make d")
    shim.until(is_question)
    status, out, err = shim.finish(timeout=15)
    assert status == 0, ("the shim did not exit" if status is None else status, err)
    closed = "the app closed its input: no answer can come"
    assert [(p["tool_use_id"], p["allow"], p.get("reason")) for p in permits(reaped)] == [
        ("toolu_d", False, closed), ("toolu_e", False, closed)]  # fmt: skip
    assert not any(is_question(f) for f in map(json.loads, out.splitlines()))
    (result,) = results(out)
    assert [d["tool_use_id"] for d in result["permission_denials"]] == ["toolu_d", "toolu_e"]
    assert gone(servers(reaped))


@pytest.mark.parametrize("size", [100, 1 << 20], ids=["small", "1MiB"])
def test_a_server_that_stops_reading_is_given_the_request_deadline(reaped: Path, size: int) -> None:
    """It reads nothing after tools/list: a message small enough for the pipe waits for an
    answer, one of 1 MiB blocks in the write; both end at the request deadline
    (CALIBAN_CLAUDE_MCP_TIMEOUT) in an error result, the server killed, the shim exits."""
    shim = Raw(reaped, {**ONE_TOOL, "deaf_after": 3}, CALIBAN_CLAUDE_MCP_TIMEOUT="2")
    started = time.monotonic()
    shim.user("x" * size)
    frames = shim.until(lambda f: f["type"] == "result", timeout=20)
    took = time.monotonic() - started
    result = frames[-1]
    said = "no answer to tools/call within 2 s" if size < 1000 else "caliban mcp serve read none of its input for 2 s"
    assert result["is_error"] and result["errors"][0] == said, result
    status, _, err = shim.finish(timeout=10)
    assert status == 1 and took < 8, (took, err)
    assert gone(servers(reaped))


def test_answers_to_ids_never_sent_are_not_kept(reaped: Path) -> None:
    """300,000 answers to ids the shim never sent: dropped as they come (only an answer to a
    request in flight is kept), the shim's peak RSS stays where a plain run has it."""
    shim = Raw(reaped, {**ONE_TOOL, "flood_answers": 300_000})
    shim.user("make d")
    question = shim.until(is_question, timeout=60)[-1]
    rss = peak_rss_kb(shim.proc.pid)
    shim.send({"type": "control_response", "response": {"subtype": "success", "request_id": question["request_id"],
               "response": {"behavior": "allow", "updatedInput": question["request"]["input"]}}})  # fmt: skip
    result = shim.until(lambda f: f["type"] == "result")[-1]
    assert result["result"] == "Made d."
    status, _, _ = shim.finish(timeout=15)
    assert status == 0
    assert rss < 80_000, f"peak RSS {rss} kB"
    assert gone(servers(reaped))


@pytest.mark.parametrize("cursor", ["x", -1, None, 10**9], ids=["text", "negative", "null", "ahead"])
def test_a_bad_next_cursor_is_the_servers_error_not_the_shims(reaped: Path, cursor: Any) -> None:
    """caliban's next_cursor is the buffer's length (registry.rs `poll`): the cursor sent plus the
    events returned. Anything else is the server's protocol error: the message's error result
    names it (not an internal error 'caliban exited with status 70'), the server is ended."""
    shim = Raw(reaped, {"messages": [{"turns": [{"text": "Hello there."}]}], "next_cursor": cursor})
    shim.user("hi")
    result = shim.until(lambda f: f["type"] == "result")[-1]
    assert result["is_error"] and "next_cursor" in result["errors"][0], result
    assert "status 70" not in result["errors"][0]
    status, _, err = shim.finish()
    assert status == 1 and b"internal error" not in err, err
    assert gone(servers(reaped))


async def test_a_limit_that_is_no_number_of_seconds_is_said_and_the_default_kept(reaped: Path) -> None:
    async def allow(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {}

    lines: list[str] = []
    env = {"CALIBAN_CLAUDE_HOOK_TIMEOUT": "-1", "CALIBAN_CLAUDE_MCP_TIMEOUT": "soon"}
    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[allow])]}  # type: ignore[list-item]
    (messages,) = await conversation(
        options(reaped, ONE_TOOL, env, hooks=hooks, can_use_tool=Allow(), stderr=lines.append), "make d"
    )
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "Made d."
    said = [line for line in lines if "expected a number of seconds" in line]
    assert said == [
        "caliban-claude: warning: CALIBAN_CLAUDE_MCP_TIMEOUT=soon: expected a number of seconds above 0; 60 s it is",
        "caliban-claude: warning: CALIBAN_CLAUDE_HOOK_TIMEOUT=-1: expected a number of seconds above 0; 60 s it is",
    ], lines
