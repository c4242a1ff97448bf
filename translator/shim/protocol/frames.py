"""Every frame the shim writes itself (spec §2.1), as Claude Code writes them: the
answers to the app's control requests, the shim's own requests to the app (`can_use_tool`,
`hook_callback`, with the bodies Claude Code sends: shared/reference/cc-2.1.333/sdk-ts/
can_use_tool*.wire.jsonl, hooks_pretooluse, sdk-wire/query_callbacks), and the session's frames.

The SDK waits up to 60 s for an answer to each request, so every request is answered at once;
what caliban cannot do is answered with an error, which the app sees as an exception.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from translator.transcripts.lines import INTERRUPTED
from translator.version import CLAUDE_CODE

CLI_VERSION = CLAUDE_CODE  # the Claude Code version emulated (the SDK reads it from init)


def success(request_id: str, response: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    }


def error(request_id: str, message: str) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": message}}


def api_key_source(env: Mapping[str, str]) -> str:
    """The init's `apiKeySource`: whether the session's environment gives caliban an API key."""
    return "ANTHROPIC_API_KEY" if env.get("ANTHROPIC_API_KEY") else "none"


def initialize(mode: str, hooks_sent: bool, env: Mapping[str, str], applied: dict[str, bool] | None = None,
               models: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    """Claude Code's initialize keys with neutral values, then the `*_applied` keys of the fields
    sent. `hook_on_failure_supported: false` makes the SDK refuse hooks that must block on
    failure (they would never run here)."""
    return {
        "commands": [],
        "agents": [],
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": models or [],
        "account": {"tokenSource": "none", "apiKeySource": api_key_source(env), "apiProvider": "firstParty"},
        "pid": os.getpid(),
        "claude_code_version": CLI_VERSION,
        "current_permission_mode": mode,
        "hook_on_failure_supported": False,
        "hooks_applied": not hooks_sent,
        "fast_mode_state": "off",
        "session_state": "idle",
        "capabilities": [],
        **(applied or {}),
    }


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def status(mode: str, session_id: str) -> dict[str, Any]:
    """The frame Claude Code prints after a permission mode change."""
    return {"type": "system", "subtype": "status", "status": None, "permissionMode": mode,
            "uuid": str(uuid.uuid4()), "session_id": session_id}  # fmt: skip


def user_echo(message: dict[str, Any], session_id: str) -> dict[str, Any]:
    """An SDK user message echoed back (`--replay-user-messages`)."""
    return {**message, "session_id": session_id, "uuid": message.get("uuid") or str(uuid.uuid4()), "timestamp": now()}


def unsupported(request_id: str, subtype: str) -> dict[str, Any]:
    return error(request_id, f"caliban shim: {subtype} is not supported")


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


# The variables that have the CLI tell its session's states (`session_state_changed`): read off the
# bundled CLI 2.1.332 (it writes the frame on every change when either is set; both SDKs set one,
# `claude -p` alone prints none).
STATE_VARIABLES = ("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS", "CLAUDE_CODE_SDK_READS_SESSION_STATE")


def states_asked(env: Mapping[str, str]) -> bool:
    """Whether the app asks for the session's states as the CLI reads it (TS SDK 0.3:
    CLAUDE_CODE_SDK_READS_SESSION_STATE; Zed's claude-agent-acp, on SDK 0.2.83:
    CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS, whose prompt ends only at the idle)."""
    return any(env.get(name, "") not in ("", "0", "false") for name in STATE_VARIABLES)


def session_state(state: str, session_id: str) -> dict[str, Any]:
    """`running`, `requires_action` or `idle`: the SDK ends a callback run at `idle` after a result."""
    return {"type": "system", "subtype": "session_state_changed", "state": state, "sdk_host_only": True,
            "uuid": str(uuid.uuid4()), "session_id": session_id, "written_at": now()}  # fmt: skip


def no_conversation(line: str, session_id: str) -> dict[str, Any]:
    """The CLI's result (2.1.332's bundled binary, which tests/shim/test_shim_sessions.py runs
    beside the shim) for a session to resume that is not there: the only frame it prints,
    before it exits 1."""
    usage = {"output_tokens_details": {"thinking_tokens": 0}, "input_tokens": 0, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 0,
             "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard",
             "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
             "inference_geo": "", "iterations": [], "speed": "standard", "fallback_credit": None}  # fmt: skip
    return {"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "duration_api_ms": 0,
            "is_error": True, "num_turns": 0, "stop_reason": None, "session_id": session_id, "total_cost_usd": 0,
            "usage": usage, "modelUsage": {}, "permission_denials": [], "uuid": str(uuid.uuid4()), "errors": [line],
            "result_index": 0}  # fmt: skip


def interrupted(session_id: str, for_tool: bool = False) -> dict[str, Any]:
    """The user frame Claude Code prints before the result of an interrupted run."""
    text = INTERRUPTED[:-1] + " for tool use]" if for_tool else INTERRUPTED
    return {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None, "session_id": session_id, "uuid": str(uuid.uuid4()), "timestamp": now()}  # fmt: skip
