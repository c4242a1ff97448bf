"""The shim's own control requests to the app (`can_use_tool`, `hook_callback`), with the
bodies Claude Code sends (shared/reference/cc-2.1.333/sdk-ts/can_use_tool*.wire.jsonl,
hooks_pretooluse, sdk-wire/query_callbacks); channel.py sends them and waits for the answers.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def can_use_tool(tool: str, tool_input: Any, tool_use_id: str) -> dict[str, Any]:
    """Claude Code's permission request for a built-in tool."""
    rule: dict[str, Any] = {"toolName": tool}
    request: dict[str, Any] = {"subtype": "can_use_tool", "tool_name": tool, "display_name": tool, "input": tool_input}
    if tool == "Bash" and isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        request["description"] = rule["ruleContent"] = tool_input["command"]
    request["permission_suggestions"] = [
        {"type": "addRules", "rules": [rule], "behavior": "allow", "destination": "localSettings"}
    ]
    request["tool_use_id"] = tool_use_id
    return request


def hook_callback(callback_id: str, event: str, base: dict[str, Any], fields: dict[str, Any],
                  tool_use_id: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Claude Code's hook call: the session's common input, the event's own fields."""
    return {"subtype": "hook_callback", "callback_id": callback_id,
            "input": {**base, "hook_event_name": event, **fields}, "tool_use_id": tool_use_id}  # fmt: skip


def session_state(state: str, session_id: str) -> dict[str, Any]:
    """`running`, `requires_action` or `idle`: the SDK ends a callback run at `idle` after a result."""
    return {"type": "system", "subtype": "session_state_changed", "state": state, "sdk_host_only": True,
            "uuid": str(uuid.uuid4()), "session_id": session_id, "written_at": now()}  # fmt: skip


def interrupted(session_id: str, for_tool: bool) -> dict[str, Any]:
    """The user frame Claude Code prints before the result of an interrupted run."""
    text = "[Request interrupted by user for tool use]" if for_tool else "[Request interrupted by user]"
    return {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None, "session_id": session_id, "uuid": str(uuid.uuid4()), "timestamp": now()}  # fmt: skip
