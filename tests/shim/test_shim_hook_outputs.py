"""Hook outputs beyond a decision, on the drive backend under the real Python SDK, as the
recordings show them (shared/reference/cc-2.1.333/hooks-output/): `systemMessage` is a
`system/informational` frame for the app; `continue: false` from UserPromptSubmit stops the
message before the model, from PreToolUse after the tool; UserPromptSubmit's
`additionalContext` goes to the model with the message; a tool hook's context, which caliban
cannot take mid-run, is said."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookMatcher,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    UserMessage,
)
from support_inprocess import in_process
from support_processes import fake_caliban

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
LS = {"name": "Bash", "input": {"command": "ls | wc -l"}, "id": "toolu_ls", "result": "3"}
TWO_TURNS = {"messages": [{"turns": [{"text": "Counting.", "tools": [LS]}, {"text": "There are 3 files."}]}]}


def options(tmp_path: Path, hooks: dict[str, Any], **kw: Any) -> ClaudeAgentOptions:
    wrapper = fake_caliban(tmp_path)
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_SERVE_SCRIPT": json.dumps(TWO_TURNS), "FAKE_SERVE_LOG": str(tmp_path / "serve.jsonl")}  # fmt: skip
    matchers = {event: [HookMatcher(matcher=None, hooks=[answer(out)])] for event, out in hooks.items()}
    return ClaudeAgentOptions(cli_path=SHIM, env=env, hooks=matchers, allowed_tools=["Bash"], **kw)  # type: ignore[arg-type]


def answer(out: dict[str, Any]) -> Any:
    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return out

    return hook


async def run(opts: ClaudeAgentOptions) -> list[Any]:
    async with in_process(opts) as client:
        await client.query("how many files?")
        return [m async for m in client.receive_response()]


def served(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "serve.jsonl").read_text().splitlines()]


async def test_a_system_message_is_an_informational_frame(tmp_path: Path) -> None:
    hooks = {"UserPromptSubmit": {"systemMessage": "UPS-MARK"}, "PreToolUse": {"systemMessage": "PRE-MARK"}}
    messages = await run(options(tmp_path, hooks))
    said = [m.data for m in messages if isinstance(m, SystemMessage) and m.subtype == "informational"]
    assert [(d["content"], d["level"]) for d in said] == [("UserPromptSubmit says: UPS-MARK", "notice"),
                                                          ("PreToolUse:Bash says: PRE-MARK", "notice")]  # fmt: skip
    assert all(set(d) == {"type", "subtype", "content", "level", "uuid", "session_id", "written_at"} for d in said)
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "There are 3 files."


async def test_user_prompt_submit_continue_false_stops_before_the_model(tmp_path: Path) -> None:
    messages = await run(options(tmp_path, {"UserPromptSubmit": {"continue": False, "stopReason": "STOP-MARK"}}))
    (said,) = [m.data for m in messages if isinstance(m, SystemMessage) and m.subtype == "informational"]
    assert said["content"] == "Operation stopped by hook: STOP-MARK" and said["level"] == "warning"
    assert said["prevent_continuation"] is True
    assert said["prompt_submit_outcome"] == {"kind": "stopped_by_hook", "prompt_kept": True, "reason": "STOP-MARK"}
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result, result.num_turns, result.stop_reason) == (
        "success", False, "Operation stopped by hook: STOP-MARK", 0, None)  # fmt: skip
    assert not [e for e in served(tmp_path) if e.get("in", {}).get("params", {}).get("name") == "caliban_run"]


async def test_pre_tool_use_continue_false_runs_the_tool_then_stops(tmp_path: Path) -> None:
    messages = await run(options(tmp_path, {"PreToolUse": {"continue": False, "stopReason": "halt"}}))
    results = [b for m in messages if isinstance(m, UserMessage) and isinstance(m.content, list)
               for b in m.content if isinstance(b, ToolResultBlock)]  # fmt: skip
    assert [(r.tool_use_id, r.content) for r in results] == [("toolu_ls", "3")]  # the tool ran
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result, result.stop_reason, result.terminal_reason) == (
        "success", False, "", "tool_use", "hook_stopped")  # fmt: skip
    assert "There are 3 files." not in str(messages)  # the model was not asked again


async def test_additional_context_of_user_prompt_submit_reaches_the_model_with_the_message(tmp_path: Path) -> None:
    lines: list[str] = []
    hooks = {"UserPromptSubmit": {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "CTX"}},
             "PostToolUse": {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "POST"}}}  # fmt: skip
    await run(options(tmp_path, hooks, stderr=lines.append))
    (started,) = [e["in"]["params"]["arguments"] for e in served(tmp_path)
                  if e.get("in", {}).get("params", {}).get("name") == "caliban_run"]  # fmt: skip
    assert started["prompt"] == "how many files?\n\n<system-reminder>\nUserPromptSubmit hook additional context: CTX\n</system-reminder>"
    assert sum("PostToolUse hook additionalContext" in line and "does not reach the model" in line for line in lines) == 1
