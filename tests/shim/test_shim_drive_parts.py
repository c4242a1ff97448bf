"""The drive backend's pure parts: an interactive run cut into one run per message (through
the real core), the permission policy, the hook table and verdicts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from translator.api import Stream
from translator.shim.backends.drive.segments import Segments
from translator.shim.permissions.hooks import Hooks, blocked, pre_tool_verdict
from translator.shim.permissions.policy import Policy
from translator.shim.protocol.initialize import read


def turn(index: int, text: str, usage: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {"message_id": f"m{index}", "model": "claude-sonnet-4-5", "turn_index": index, "type": "TurnStart"},
        {"content_block_index": 0, "text": text, "turn_index": index, "type": "AssistantTextDelta"},
        {"assistant_message": {"content": [{"text": text, "type": "text"}], "role": "assistant"}, "stop_reason": "end_turn",
         "tbt": None, "tool_results": [], "ttft": None, "turn_index": index, "type": "TurnEnd", "usage": usage},
    ]  # fmt: skip


def test_each_message_is_a_run_with_its_own_turns_and_usage() -> None:
    segments, stream = Segments(), Stream("claude-code", session_id="S", clock="wall")
    frames: list[dict[str, Any]] = []

    def fold(line: bytes | None) -> None:
        if line is not None:
            frames.extend(orjson.loads(f) for f in stream.feed(line))

    segments.begin()
    for event in turn(0, "one", {"input_tokens": 1000, "output_tokens": 10}) + turn(1, "two", {"input_tokens": 1100, "output_tokens": 5}):
        fold(segments.event(event))
    fold(segments.close())
    segments.begin()
    for event in turn(2, "three", {"input_tokens": 2000, "output_tokens": 7}):  # turn_index keeps counting
        fold(segments.event(event))
    fold(segments.close())
    assert segments.close() is None  # once
    fold(segments.event({"type": "RunEnd", "stopped_for": "EndOfTurn", "final_messages": [], "turn_count": 3,
                         "total_usage": {"input_tokens": 4100, "output_tokens": 22}}))  # the session's own: after the last boundary  # fmt: skip
    results = [f for f in frames if f["type"] == "result"]
    assert [(r["result"], r["num_turns"], r["usage"]["output_tokens"], r["result_index"]) for r in results] == [
        ("two", 2, 15, 0), ("three", 1, 7, 1)]  # fmt: skip
    assert [f["subtype"] for f in frames if f["type"] == "system"] == ["init", "init"]
    assert stream.take_diagnostics() == []


def test_a_message_without_events_still_gets_a_result_and_a_run_end_closes_an_open_one() -> None:
    segments = Segments()
    segments.begin()
    (only,) = [orjson.loads(line) for line in [segments.close({"HookDenied": "no"})] if line]
    assert (only["turn_count"], only["stopped_for"], only["total_usage"]) == (0, {"HookDenied": "no"},
                                                                              {"input_tokens": 0, "output_tokens": 0})  # fmt: skip
    segments.begin()
    segments.event(turn(5, "x", {"input_tokens": 9, "output_tokens": 1})[0])
    line = segments.event({"type": "RunEnd", "stopped_for": {"ProviderError": "boom"}, "total_usage": {}})
    assert line is not None and orjson.loads(line)["stopped_for"] == {"ProviderError": "boom"}
    assert segments.close() is None


@pytest.mark.parametrize(
    ("mode", "allowed", "disallowed", "tool", "tool_input", "decision"),
    [
        ("default", None, None, "Bash", {"command": "ls"}, "ask"),
        ("bypassPermissions", None, None, "Bash", {"command": "rm -rf x"}, "allow"),
        ("bypassPermissions", None, "Bash(rm:*)", "Bash", {"command": "rm -rf x"}, "deny"),  # a deny rule first
        ("default", "Bash(git status:*)", None, "Bash", {"command": "git status --short"}, "allow"),
        ("default", "Bash(git status:*)", None, "Bash", {"command": "git push"}, "ask"),
        ("acceptEdits", None, None, "Write", {"file_path": "a", "content": ""}, "allow"),
        ("acceptEdits", None, None, "Bash", {"command": "ls"}, "ask"),
        ("plan", None, None, "Edit", {"file_path": "a"}, "deny"),
        ("dontAsk", None, None, "WebFetch", {"url": "https://x.org/"}, "deny"),
        ("default", "WebFetch(domain:*.example.com)", None, "WebFetch", {"url": "https://docs.example.com/a"}, "allow"),
        ("default", "Write(src/*)", None, "Write", {"file_path": "src/a.py"}, "allow"),
        ("default", "Task", None, "AgentTool", {}, "allow"),  # Claude Code's name for caliban's tool
        ("default", "Read,Bash", None, "Bash", {"command": "x"}, "allow"),
    ],
)
def test_the_mode_and_rules_settle_a_prompt_as_claude_code_does(
    mode: str, allowed: str | None, disallowed: str | None, tool: str, tool_input: Any, decision: str
) -> None:
    assert Policy(allowed, disallowed).decide(mode, tool, tool_input) == decision


def test_hook_matchers_and_what_never_fires() -> None:
    hooks = Hooks(read({"subtype": "initialize", "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["a"]}, {"matcher": None, "hookCallbackIds": ["b"]},
                       {"matcher": "Write|Edit", "hookCallbackIds": ["c"]}, {"matcher": "mcp__.*", "hookCallbackIds": ["d"], "timeout": 2.5}],
        "PreCompact": [{"matcher": None, "hookCallbackIds": ["e"]}],
        "Stop": [{"hookCallbackIds": ["f"]}],
    }}).hooks)  # fmt: skip
    assert hooks.callbacks("PreToolUse", "Bash") == [("a", 60), ("b", 60)]
    assert hooks.callbacks("PreToolUse", "Edit") == [("b", 60), ("c", 60)]
    assert hooks.callbacks("PreToolUse", "mcp__calc__add") == [("b", 60), ("d", 2.5)]  # (its matcher's own)
    assert hooks.callbacks("Stop") == [("f", 60)] and hooks.callbacks("PostToolUse", "Bash") == []
    assert hooks.unfired() == ["PreCompact"]


def test_pre_tool_verdicts_deny_wins_and_legacy_decisions_count() -> None:
    def out(decision: str, reason: str = "") -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                       "permissionDecisionReason": reason}}  # fmt: skip

    assert pre_tool_verdict([out("allow"), out("deny", "no"), out("ask")]) == ("deny", "no")
    assert pre_tool_verdict([out("allow"), out("ask", "?")]) == ("ask", "?")
    assert pre_tool_verdict([{}, {"decision": "approve"}]) == ("allow", "")
    assert pre_tool_verdict([{"decision": "block", "reason": "legacy"}]) == ("deny", "legacy")
    assert pre_tool_verdict([{"continue": False, "stopReason": "stop"}]) == (None, "")  # (a stop after the tool, not a deny)
    assert pre_tool_verdict([{}]) == (None, "")



def test_pre_tool_verdicts_rank_defer_after_deny_and_an_unknown_decision_as_a_deny() -> None:
    """Claude Code's precedence, deny > defer > ask > allow; a decision not known (a typo, a newer
    CLI's) never lets the tool run: it ranks with deny, its value kept for the warning."""

    def out(decision: Any) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision}}

    assert pre_tool_verdict([out("allow"), out("defer"), out("ask")]) == ("defer", "")
    assert pre_tool_verdict([out("defer"), out("deny")]) == ("deny", "")
    assert pre_tool_verdict([out("allow"), out("alow")]) == ("unknown", "'alow'")
    assert pre_tool_verdict([out(True)]) == ("unknown", "True")
    assert pre_tool_verdict([{"decision": "approve"}, {"decision": "maybe"}]) == ("unknown", "'maybe'")
    assert blocked([{}, {"decision": "block", "reason": "not that"}]) == "not that" and blocked([{}]) is None
