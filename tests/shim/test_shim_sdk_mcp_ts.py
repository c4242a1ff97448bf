"""The app's own tools under the real TypeScript Agent SDK (`createSdkMcpServer` + `tool()`
with a zod schema): the SDK sends its servers' manifests in `initialize`, so the shim answers
caliban's handshake from them and relays only `tools/call` (`mcp_message`), as Claude Code
does (shared/reference/cc-2.1.333/sdk-mcp/sdk_mcp_*). Skipped where node is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import SUPPORT
from support_processes import fake_caliban

DRIVE = SUPPORT / "ts_sdk" / "tools.mjs"

SHIM = str(Path(sys.executable).with_name("caliban-claude"))
ADD = {"tool": "mcp__calc__add", "input": {"a": 2, "b": 3}, "id": "toolu_add"}


def session(sdk: Path, tmp_path: Path, calls: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    wrapper = fake_caliban(tmp_path)
    env = {"CALIBAN_BIN": str(wrapper), "CALIBAN_SESSIONS_DIR": str(tmp_path / "sessions"),
           "FAKE_CALIBAN_SCRIPTS": json.dumps([{"mcp_calls": calls, "text": "The sum is 5."}])}  # fmt: skip
    spec = {"prompt": "add 2 and 3", **spec, "options": {"pathToClaudeCodeExecutable": SHIM, "env": {**os.environ, **env},
                                                          **spec.get("options", {})}}  # fmt: skip
    proc = subprocess.run(["node", str(DRIVE), str(sdk), json.dumps(spec)], capture_output=True, timeout=90)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert events and events[-1]["kind"] == "done", (proc.stdout[-2000:], proc.stderr[-2000:])
    assert not [e for e in events if e["kind"] == "exception"], events
    return events


def of(events: list[dict[str, Any]], kind: str) -> list[Any]:
    return [e["data"] for e in events if e["kind"] == kind]


def tool_results(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["tool_use_id"]: b for m in of(events, "msg") if m["type"] == "user" and isinstance(m["message"]["content"], list)
            for b in m["message"]["content"] if b.get("type") == "tool_result"}  # fmt: skip


def uses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls the app was shown, in order: a relayed call by the relay's id, the one its
    `canUseTool` and handler were told (caliban names a call only once it has returned)."""
    return [b for m in of(events, "msg") if m["type"] == "assistant" for b in m["message"]["content"]
            if b.get("type") == "tool_use"]  # fmt: skip


def test_an_sdk_tool_is_called_and_mcp_server_status_lists_it(sdk: Path, tmp_path: Path) -> None:
    events = session(sdk, tmp_path, [ADD], {"options": {"allowedTools": ["mcp__calc__add"]}})
    (handler,) = of(events, "handler")
    (add,) = uses(events)
    assert handler["args"] == {"a": 2, "b": 3} and handler["meta"]["claudecode/toolUseId"] == add["id"]
    block = tool_results(events)[add["id"]]  # as in sdk-mcp/sdk_mcp_tool: the blocks, no is_error key
    assert block == {"tool_use_id": add["id"], "type": "tool_result", "content": [{"type": "text", "text": "5"}]}
    init = next(m for m in of(events, "msg") if m["type"] == "system" and m["subtype"] == "init")
    assert init["mcp_servers"] == [{"name": "calc", "status": "connected", "source": "sdk"}]
    before, after = of(events, "status")
    for status in (before, after):
        assert status == [{"name": "calc", "status": "connected", "serverInfo": {"name": "calc", "version": "1.0.0"},
                           "transport": "sdk", "scope": "dynamic", "source": "sdk", "tools": [{"name": "add", "annotations": {}}]}]  # fmt: skip
    (result,) = [m for m in of(events, "msg") if m["type"] == "result"]
    assert (result["subtype"], result["result"]) == ("success", "The sum is 5.")


@pytest.mark.parametrize(("mode", "text"), [("is_error", "add refused: demo error"), ("throw", "add exploded")])
def test_is_error_and_a_thrown_handler(sdk: Path, tmp_path: Path, mode: str, text: str) -> None:
    events = session(sdk, tmp_path, [ADD], {"mode": mode, "options": {"allowedTools": ["mcp__calc__add"]}})
    (add,) = uses(events)
    block = tool_results(events)[add["id"]]  # as in sdk-mcp/sdk_mcp_is_error_always_load, sdk_mcp_throw
    assert list(block.items()) == [("type", "tool_result"), ("content", text), ("is_error", True), ("tool_use_id", add["id"])]
    (user,) = [m for m in of(events, "msg") if m["type"] == "user"]
    assert user["tool_use_result"] == f"Error: {text}"


def test_can_use_tool_is_asked_and_its_deny_never_runs_the_handler(sdk: Path, tmp_path: Path) -> None:
    calls = [ADD, {**ADD, "id": "toolu_add2", "input": {"a": 1, "b": 1}}]
    events = session(sdk, tmp_path, calls, {"canUseTool": True, "deny": [1]})
    first, second = uses(events)
    assert [(a["toolName"], a["toolUseID"]) for a in of(events, "asked")] == [("mcp__calc__add", first["id"]), ("mcp__calc__add", second["id"])]
    assert [h["args"] for h in of(events, "handler")] == [{"a": 2, "b": 3}]
    assert tool_results(events)[second["id"]]["is_error"]
