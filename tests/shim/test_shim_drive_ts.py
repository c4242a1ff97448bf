"""The drive backend under the real TypeScript Agent SDK (`@anthropic-ai/claude-agent-sdk`,
run by node): `canUseTool`, a PreToolUse hook, deny+interrupt and a two-message conversation,
against the fake `caliban mcp serve`; the SDK ends each callback run only at the
`session_state_changed: idle` after its result (the recordings in
shared/reference/cc-2.1.333/sdk-ts/). Skipped, and said so, where node is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support_fixtures import SUPPORT
from support_processes import fake_caliban, running

DRIVE = SUPPORT / "ts_sdk" / "callbacks.mjs"
SHIM = str(Path(sys.executable).with_name("caliban-claude"))
TOUCH_D = {"name": "Bash", "input": {"command": "touch d.txt"}, "id": "toolu_d"}
TOUCH_E = {"name": "Bash", "input": {"command": "touch e.txt"}, "id": "toolu_e"}
TWO_TOOLS = {"turns": [{"text": "Counting.", "tools": [TOUCH_D, TOUCH_E]}, {"text": "Made d.txt."}]}


def session(sdk: Path, tmp_path: Path, script: dict[str, Any], spec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run one SDK session: what the app saw (kind, data), and the fake server's log."""
    wrapper = fake_caliban(tmp_path)
    log = tmp_path / "serve.jsonl"
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_SERVE_SCRIPT": json.dumps(script), "FAKE_SERVE_LOG": str(log)}  # fmt: skip
    spec = {**spec, "options": {"pathToClaudeCodeExecutable": SHIM, "env": {**os.environ, **env}}}
    proc = subprocess.run(["node", str(DRIVE), str(sdk), json.dumps(spec)], capture_output=True, timeout=90)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    served = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert events and events[-1]["kind"] == "done", (proc.stdout[-2000:], proc.stderr[-2000:])
    return events, served


def of(events: list[dict[str, Any]], kind: str) -> list[Any]:
    return [e["data"] for e in events if e["kind"] == kind]


def tool_results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["tool_use_id"]: b for m in messages if m["type"] == "user" and isinstance(m["message"]["content"], list)
            for b in m["message"]["content"] if b.get("type") == "tool_result"}  # fmt: skip


def test_can_use_tool_allow_and_deny(sdk: Path, tmp_path: Path) -> None:
    spec = {"prompt": ["make d and e"], "canUseTool": True, "deny": {"toolu_e": {"message": "Not allowed to create e.txt."}}}
    events, served = session(sdk, tmp_path, {"messages": [TWO_TOOLS]}, spec)
    assert [(a["toolName"], a["input"], a["toolUseID"]) for a in of(events, "asked")] == [
        ("Bash", {"command": "touch d.txt"}, "toolu_d"), ("Bash", {"command": "touch e.txt"}, "toolu_e")]  # fmt: skip
    messages = of(events, "msg")
    results = tool_results(messages)
    assert results["toolu_d"]["content"] == "done"
    assert results["toolu_e"]["content"] == "Tool call denied: Not allowed to create e.txt." and results["toolu_e"]["is_error"]
    (result,) = [m for m in messages if m["type"] == "result"]
    assert (result["subtype"], result["is_error"], result["result"]) == ("success", False, "Made d.txt.")
    assert of(events, "exception") == []
    assert not any(m.get("subtype") == "session_state_changed" for m in messages)  # the SDK's own (sdk_host_only)
    assert (messages[0]["type"], messages[0]["subtype"], messages[-1]["type"]) == ("system", "init", "result")
    assert not any(running(e["pid"]) for e in served if "pid" in e)


def test_a_deny_that_interrupts(sdk: Path, tmp_path: Path) -> None:
    spec = {"prompt": ["make d"], "canUseTool": True,
            "deny": {"toolu_d": {"message": "The user stopped this.", "interrupt": True}}}  # fmt: skip
    events, _ = session(sdk, tmp_path, {"messages": [TWO_TOOLS]}, spec)
    messages = of(events, "msg")
    texts = [b.get("text") for m in messages if m["type"] == "user" for b in m["message"]["content"] if isinstance(b, dict)]
    assert "[Request interrupted by user for tool use]" in texts
    (result,) = [m for m in messages if m["type"] == "result"]
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == ("error_during_execution", True, "aborted_tools")
    assert [a["toolUseID"] for a in of(events, "asked")] == ["toolu_d"]


def test_a_pretooluse_hook_denies_without_can_use_tool(sdk: Path, tmp_path: Path) -> None:
    events, _ = session(sdk, tmp_path, {"messages": [TWO_TOOLS]}, {"prompt": ["make d and e"], "hookDeny": "e.txt"})
    hooks = of(events, "hook")
    assert [(h["hook_event_name"], h["tool_use_id"]) for h in hooks] == [("PreToolUse", "toolu_d"), ("PreToolUse", "toolu_e")]
    results = tool_results(of(events, "msg"))
    assert results["toolu_d"]["content"] == "done" and results["toolu_e"]["content"] == "Tool call denied: hook denies"


def test_two_messages_in_one_server(sdk: Path, tmp_path: Path) -> None:
    script = {"messages": [{"turns": [{"text": "First.", "tools": [TOUCH_D]}, {"text": "One."}]},
                           {"turns": [{"text": "Two."}]}]}  # fmt: skip
    events, served = session(sdk, tmp_path, script, {"prompt": ["one", "two"], "canUseTool": True})
    results = [m for m in of(events, "msg") if m["type"] == "result"]
    assert [(r["result"], r["num_turns"]) for r in results] == [("One.", 2), ("Two.", 1)]
    assert len([e for e in served if "pid" in e]) == 1


def test_a_deferring_hook_stops_the_turn_and_supported_models_lists_the_aliases(sdk: Path, tmp_path: Path) -> None:
    """`defer`: the call is never run and the result is Claude Code's `tool_deferred` with the
    pending call; `supportedModels()` reads the initialize answer's `models`."""
    spec = {"prompt": ["make d"], "hookDecision": "defer", "supportedModels": True}
    events, served = session(sdk, tmp_path, {"messages": [TWO_TOOLS]}, spec)
    (models,) = of(events, "models")
    assert [m["value"] for m in models][:4] == ["default", "sonnet", "opus", "haiku"]
    assert models[0]["displayName"] == "Default (recommended)" and all(m["description"] for m in models)
    messages = of(events, "msg")
    results = tool_results(messages)  # toolu_d pending (no result); toolu_e, later in the turn, denied unasked
    assert list(results) == ["toolu_e"] and results["toolu_e"]["content"] == "Tool call denied: the turn stopped at a deferred tool call"
    assert [h["tool_use_id"] for h in of(events, "hook")] == ["toolu_d"]
    (result,) = [m for m in messages if m["type"] == "result"]
    assert (result["subtype"], result["stop_reason"], result["terminal_reason"]) == ("success", "tool_deferred", "tool_deferred")
    assert result["deferred_tool_use"] == {"id": "toolu_d", "name": "Bash", "input": {"command": "touch d.txt"}}
    permits = [e["in"]["params"]["arguments"] for e in served if e.get("in", {}).get("params", {}).get("name") == "caliban_permit"]
    assert [p["allow"] for p in permits] == [False, False]
