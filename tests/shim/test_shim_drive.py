"""`caliban-claude`'s drive backend end to end: the real claude-agent-sdk with `can_use_tool`
and hook callbacks drives the shim, which drives the fake `caliban mcp serve`
(tests/support/fake_caliban_serve.py, held to the spec by test_fake_caliban_serve.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from support_fixtures import FIXTURES
from support_inprocess import in_process, queried
from support_processes import fake_caliban, running

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
TOUCH_D = {"name": "Bash", "input": {"command": "touch d.txt"}, "id": "toolu_d"}
TOUCH_E = {"name": "Bash", "input": {"command": "touch e.txt"}, "id": "toolu_e"}
READ = {"name": "Read", "input": {"file_path": "a.txt"}, "id": "toolu_read", "result": "a"}
TOOLS_THEN_TEXT = {"turns": [{"text": "Counting.", "tools": [READ, TOUCH_D, TOUCH_E]}, {"text": "Made d.txt."}]}


@dataclass
class Serve:
    """A fake caliban with `mcp serve` in a temporary directory, and what it logged."""

    root: Path

    def options(self, script: dict[str, Any], env: dict[str, str] | None = None, **kw: Any) -> ClaudeAgentOptions:
        full = {
            "CALIBAN_BIN": str(self.root / "caliban"),
            "CALIBAN_SESSIONS_DIR": str(self.root / "sessions"),
            "FAKE_SERVE_SCRIPT": json.dumps(script),
            "FAKE_SERVE_LOG": str(self.root / "serve.jsonl"),
            "FAKE_CALIBAN_LOG": str(self.root / "calls.jsonl"),
            **(env or {}),
        }
        return ClaudeAgentOptions(cli_path=SHIM, env=full, **kw)

    def log(self) -> list[dict[str, Any]]:
        path = self.root / "serve.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def servers(self) -> list[int]:
        return [e["pid"] for e in self.log() if "pid" in e]

    def permits(self) -> list[dict[str, Any]]:
        return [e["in"]["params"]["arguments"] for e in self.log()
                if e.get("in", {}).get("params", {}).get("name") == "caliban_permit"]  # fmt: skip

    def print_runs(self) -> list[dict[str, Any]]:
        path = self.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def serve(tmp_path: Path) -> Serve:
    fake_caliban(tmp_path)
    return Serve(tmp_path)


class Asked:
    """A can_use_tool callback that records its calls and answers from a table."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers, self.calls = answers, []

    async def __call__(self, name: str, tool_input: dict[str, Any], context: Any) -> Any:
        self.calls.append((name, tool_input, context.tool_use_id))
        return self.answers.get(context.tool_use_id, PermissionResultAllow())


async def one(client: ClaudeSDKClient, prompt: str) -> list[Any]:
    await client.query(prompt)
    return [m async for m in client.receive_response()]


def tool_results(messages: list[Any]) -> dict[str, ToolResultBlock]:
    return {b.tool_use_id: b for m in messages if isinstance(m, UserMessage) and isinstance(m.content, list)
            for b in m.content if isinstance(b, ToolResultBlock)}  # fmt: skip


def gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(running(p) for p in pids)


async def test_can_use_tool_allow_runs_the_tool_and_deny_shows_the_model_the_message(serve: Serve) -> None:
    asked = Asked({"toolu_e": PermissionResultDeny(message="Not allowed to create e.txt.")})
    lines: list[str] = []
    options = serve.options({"messages": [TOOLS_THEN_TEXT]}, can_use_tool=asked, stderr=lines.append)
    async with in_process(options) as client:
        messages = await one(client, "make d and e")
    assert asked.calls == [("Bash", {"command": "touch d.txt"}, "toolu_d"), ("Bash", {"command": "touch e.txt"}, "toolu_e")]
    results = tool_results(messages)
    assert (results["toolu_read"].content, results["toolu_read"].is_error) == ("a", False)  # Read: never asked
    assert results["toolu_d"].content == "done" and not results["toolu_d"].is_error
    assert results["toolu_e"].content == "Tool call denied: Not allowed to create e.txt." and results["toolu_e"].is_error
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error, result.result) == (
        "success", False, "Made d.txt.")  # fmt: skip
    assert result.num_turns == 2
    assert serve.permits() == [
        {"run_id": "run-1", "tool_use_id": "toolu_d", "allow": True},
        {"run_id": "run-1", "tool_use_id": "toolu_e", "allow": False, "reason": "Not allowed to create e.txt."},
    ]
    assert serve.print_runs() == []  # no caliban -p
    assert not any("cannot be bridged" in line for line in lines)
    assert gone(serve.servers())


async def test_a_deny_that_interrupts_ends_the_run_as_claude_code_does(serve: Serve) -> None:
    asked = Asked({"toolu_d": PermissionResultDeny(message="The user stopped this.", interrupt=True)})
    script = {"servers": [{"messages": [TOOLS_THEN_TEXT]}, {"messages": [{"turns": [{"text": "ok"}]}]}]}
    options = serve.options(script, can_use_tool=asked)
    async with in_process(options) as client:
        messages = await one(client, "make d and e")
        after = await one(client, "hi")
    assert [c[2] for c in asked.calls] == ["toolu_d"]  # toolu_e was denied without asking: the run is over
    assert tool_results(messages)["toolu_d"].content == "Tool call denied: The user stopped this."
    stop, result = messages[-2], messages[-1]
    assert isinstance(stop, UserMessage) and stop.content == [TextBlock(text="[Request interrupted by user for tool use]")]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error, result.terminal_reason) == (
        "error_during_execution", True, "aborted_tools")  # fmt: skip
    assert result.permission_denials and result.permission_denials[0]["tool_use_id"] == "toolu_d"
    assert isinstance(after[-1], ResultMessage) and after[-1].result == "ok" and not after[-1].is_error
    first, second = serve.servers()  # the next message had a new server
    assert not running(first) and gone([second])


async def test_a_pretooluse_hook_denies_and_allows_without_can_use_tool(serve: Serve) -> None:
    seen: list[dict[str, Any]] = []

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append(hook_input)
        decision = "deny" if "e.txt" in hook_input["tool_input"]["command"] else "allow"
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                       "permissionDecisionReason": f"hook says {decision}"}}  # fmt: skip

    options = serve.options({"messages": [TOOLS_THEN_TEXT]}, hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[hook])]})
    async with in_process(options) as client:
        messages = await one(client, "make d and e")
    assert [(h["hook_event_name"], h["tool_name"], h["tool_use_id"]) for h in seen] == [
        ("PreToolUse", "Bash", "toolu_d"), ("PreToolUse", "Bash", "toolu_e")]  # fmt: skip
    assert seen[0]["tool_input"] == {"command": "touch d.txt"} and seen[0]["cwd"] == os.getcwd()
    results = tool_results(messages)
    assert results["toolu_d"].content == "done"
    assert results["toolu_e"].content == "Tool call denied: hook says deny" and results["toolu_e"].is_error
    assert isinstance(messages[-1], ResultMessage) and not messages[-1].is_error


async def test_two_messages_are_one_server_and_one_run_with_a_result_each(serve: Serve) -> None:
    script = {"messages": [
        {"turns": [{"text": "First.", "tools": [TOUCH_D], "usage": {"input_tokens": 1000, "output_tokens": 50}},
                   {"text": "Made d.", "usage": {"input_tokens": 1100, "output_tokens": 5}}]},
        {"turns": [{"text": "Second.", "usage": {"input_tokens": 2000, "output_tokens": 7}}]}]}  # fmt: skip
    asked = Asked({})
    async with in_process(serve.options(script, can_use_tool=asked, model="claude-sonnet-4-5")) as client:
        first = await one(client, "one")
        second = await one(client, "two")
    r1, r2 = first[-1], second[-1]
    assert isinstance(r1, ResultMessage) and isinstance(r2, ResultMessage)
    assert (r1.result, r1.num_turns, r2.result, r2.num_turns) == ("Made d.", 2, "Second.", 1)
    assert r1.session_id == r2.session_id
    assert (r1.usage["output_tokens"], r2.usage["output_tokens"]) == (55, 7)  # each message's own
    assert r2.total_cost_usd > r1.total_cost_usd > 0  # from the rate card: the drive path reports none
    assert len(serve.servers()) == 1 and len(asked.calls) == 1
    calls = [e["in"] for e in serve.log() if "in" in e and e["in"].get("method") == "tools/call"]
    sent = [c["params"]["arguments"] for c in calls if c["params"]["name"] in ("caliban_run", "caliban_send_input")]
    assert sent == [{"prompt": "one", "interactive": True}, {"run_id": "run-1", "text": "two"},
                    {"run_id": "run-1", "end": True}]  # fmt: skip
    argv = next(e["argv"] for e in serve.log() if "argv" in e)
    assert argv == ["--model", "claude-sonnet-4-5", "mcp", "serve"]
    assert gone(serve.servers())


async def test_interrupt_ends_the_server_with_an_error_result_and_the_next_message_starts_anew(serve: Serve) -> None:
    slow = {"servers": [
        {"delay": 0.05, "messages": [{"turns": [{"text": "Reading.", "tools": [READ]}, {"text": " ".join(["w"] * 400)}]}]},
        {"messages": [{"turns": [{"text": "Fresh."}]}]}]}  # fmt: skip
    lines: list[str] = []
    async with in_process(serve.options(slow, can_use_tool=Asked({}), stderr=lines.append)) as client:
        await client.query("read")
        seen: list[Any] = []
        async for message in client.receive_response():
            seen.append(message)
            if isinstance(message, AssistantMessage) and any(isinstance(b, ToolUseBlock) for b in message.content):
                started = time.monotonic()
                await client.interrupt()
                assert time.monotonic() - started < 5
        (server,) = serve.servers()
        assert not running(server)  # ended by the interrupt, before the result
        after = await one(client, "again")
    stop, result = seen[-2], seen[-1]
    assert isinstance(stop, UserMessage) and stop.content == [TextBlock(text="[Request interrupted by user]")]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error, result.terminal_reason) == (
        "error_during_execution", True, "aborted_streaming")  # fmt: skip
    assert isinstance(after[-1], ResultMessage) and after[-1].result == "Fresh."
    assert any("knows nothing of this conversation's earlier messages" in line for line in lines)
    assert gone(serve.servers())


async def test_a_server_that_dies_is_an_error_result(serve: Serve) -> None:
    options = serve.options({"die_after_events": 3, "messages": [TOOLS_THEN_TEXT]}, can_use_tool=Asked({}))
    async with in_process(options) as client:
        messages = await one(client, "go")
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.is_error and result.subtype == "error_during_execution"
    assert result.errors and result.errors[0].startswith("caliban mcp serve exited with status 1")
    assert gone(serve.servers())


async def test_a_caliban_without_mcp_serve_falls_back_to_print_mode(serve: Serve) -> None:
    asked = Asked({})
    lines: list[str] = []
    env = {"FAKE_CALIBAN_NO_SERVE": "1",
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}  # fmt: skip
    async with in_process(serve.options({}, env, can_use_tool=asked, stderr=lines.append)) as client:
        messages = await one(client, "how many files are here?")
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "There are 3 files."
    assert asked.calls == [] and len(serve.print_runs()) == 1
    said = [line for line in lines if "mcp serve is not available" in line]
    assert len(said) == 1 and "fall back to caliban -p" in said[0]
    assert any("cannot be bridged" in line for line in lines)  # today's warning, as before


async def test_without_callbacks_nothing_changes(serve: Serve) -> None:
    env = {"FAKE_CALIBAN_SCRIPTS": json.dumps([{"file": str(FIXTURES / "caliban" / "tool_use_two_turns.jsonl")}])}
    messages = [m async for m in queried("how many files are here?", serve.options({}, env))]
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "There are 3 files."
    assert len(serve.print_runs()) == 1 and serve.servers() == []


async def test_the_mode_and_rules_are_applied_before_the_app_is_asked(serve: Serve) -> None:
    write = {"name": "Write", "input": {"file_path": "x.txt", "content": "x"}, "id": "toolu_w"}
    fetch = {"name": "WebFetch", "input": {"url": "https://example.com/"}, "id": "toolu_f"}
    asked = Asked({})
    script = {"messages": [{"turns": [{"tools": [write, TOUCH_D, fetch]}, {"text": "ok"}]}]}
    options = serve.options(script, can_use_tool=asked, permission_mode="acceptEdits", disallowed_tools=["Bash"])
    async with in_process(options) as client:
        messages = await one(client, "go")
    assert [c[2] for c in asked.calls] == ["toolu_f"]  # Write: acceptEdits; Bash: a disallowed tool
    results = tool_results(messages)
    assert results["toolu_w"].content == "done" and results["toolu_d"].is_error
    assert results["toolu_d"].content == "Tool call denied: Permission to use Bash has been denied."


async def test_a_changed_input_is_denied_with_a_warning(serve: Serve) -> None:
    asked = Asked({"toolu_d": PermissionResultAllow(updated_input={"command": "touch other.txt"})})
    lines: list[str] = []
    options = serve.options({"messages": [{"turns": [{"tools": [TOUCH_D]}, {"text": "ok"}]}]}, can_use_tool=asked,
                            stderr=lines.append)  # fmt: skip
    async with in_process(options) as client:
        messages = await one(client, "go")
    assert tool_results(messages)["toolu_d"].is_error
    assert serve.permits()[0]["allow"] is False and any("updatedInput" in line for line in lines)


async def test_post_tool_use_user_prompt_submit_and_stop_hooks_fire(serve: Serve) -> None:
    events: list[tuple[str, Any]] = []

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        name = hook_input["hook_event_name"]
        events.append((name, hook_input.get("tool_response") or hook_input.get("prompt")))
        return {}

    hooks = {e: [HookMatcher(matcher=None, hooks=[hook])] for e in ("PostToolUse", "UserPromptSubmit", "Stop")}
    async with in_process(serve.options({"messages": [{"turns": [{"tools": [READ]}, {"text": "ok"}]}]},
                                             hooks=hooks)) as client:  # fmt: skip
        await one(client, "read a")
    assert events == [("UserPromptSubmit", "read a"), ("PostToolUse", "a"), ("Stop", None)]


def decision_hook(decision: Any) -> dict[str, list[HookMatcher]]:
    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        said = decision if hook_input["tool_use_id"] == "toolu_e" else "allow"
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": said}}

    return {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[hook])]}


async def test_a_deferring_pretooluse_hook_stops_the_turn_with_the_call_pending(serve: Serve) -> None:
    """`defer` (langchain-claude-cli's bind_tools lives on it): the tool never runs, the turn
    stops there, and the result says so as Claude Code's does (`tool_deferred`, the call)."""
    script = {"servers": [{"messages": [TOOLS_THEN_TEXT]}, {"messages": [{"turns": [{"text": "ok"}]}]}]}
    async with in_process(serve.options(script, hooks=decision_hook("defer"))) as client:
        messages = await one(client, "make d and e")
        after = await one(client, "hi")
    results = tool_results(messages)
    assert results["toolu_d"].content == "done" and "toolu_e" not in results  # pending: no result
    assert serve.permits()[-1] == {"run_id": "run-1", "tool_use_id": "toolu_e", "allow": False,
                                   "reason": "deferred by a PreToolUse hook: the turn stops here, the call pending"}  # fmt: skip
    result = messages[-1]
    assert isinstance(result, ResultMessage) and (result.subtype, result.is_error) == ("success", False)
    assert (result.stop_reason, result.terminal_reason) == ("tool_deferred", "tool_deferred")
    assert result.deferred_tool_use is not None and (result.deferred_tool_use.id, result.deferred_tool_use.name,
        result.deferred_tool_use.input) == ("toolu_e", "Bash", {"command": "touch e.txt"})  # fmt: skip
    assert result.permission_denials == [] and result.num_turns == 1
    assert not any(isinstance(m, AssistantMessage) and "Made d.txt." in str(m.content) for m in messages)
    assert isinstance(after[-1], ResultMessage) and after[-1].result == "ok" and after[-1].deferred_tool_use is None
    first, second = serve.servers()  # the run could not wait with a call pending: the next message had a new one
    assert not running(first) and gone([second])


@pytest.mark.parametrize("decision", ["alow", "Defer", None, 1])
async def test_an_unknown_pretooluse_decision_denies_with_a_warning(serve: Serve, decision: Any) -> None:
    lines: list[str] = []
    options = serve.options({"messages": [TOOLS_THEN_TEXT]}, hooks=decision_hook(decision), stderr=lines.append)
    async with in_process(options) as client:
        messages = await one(client, "make d and e")
    results = tool_results(messages)
    if decision is None:  # no decision at all: the hook leaves it to the mode and rules (here: ask, no callback)
        assert results["toolu_e"].is_error and not any("not one caliban-claude knows" in line for line in lines)
        return
    assert results["toolu_e"].is_error and results["toolu_e"].content == (
        f"Tool call denied: denied: a PreToolUse hook answered the unknown permissionDecision {decision!r}")
    assert serve.permits()[-1]["allow"] is False
    assert any(f"Bash: a PreToolUse hook's permissionDecision {decision!r} is not one caliban-claude knows; denied" in line
               for line in lines)  # fmt: skip


async def test_the_initialize_answer_lists_the_models(serve: Serve) -> None:
    """Claude Code's `models` (the SDKs' supportedModels(), Zed's model picker read models[0].value):
    the default first, then each alias the shim maps, with the model it maps to."""
    env = {"CALIBAN_CLAUDE_MODELS": json.dumps({"fast": "openai/gpt-5-mini"})}
    async with in_process(serve.options({"messages": []}, env=env)) as client:
        info = await client.get_server_info()
    assert info is not None
    models = info["models"]
    assert [m["value"] for m in models] == ["default", "sonnet", "opus", "haiku", "fast"]
    assert all(set(m) >= {"value", "displayName", "description"} for m in models)
    assert models[0]["displayName"] == "Default (recommended)"
    assert models[-1] == {"value": "fast", "resolvedModel": "openai/gpt-5-mini", "displayName": "Fast",
                          "description": "fast on caliban: openai/gpt-5-mini"}  # fmt: skip
