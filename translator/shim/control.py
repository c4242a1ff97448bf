"""The control protocol's answers and frames (spec §2.1), as Claude Code writes them.

The SDK waits up to 60 s for an answer to each request, so every request is answered at once;
what caliban cannot do is answered with an error, which the app sees as an exception.
"""

from __future__ import annotations

import os
import uuid
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


def api_key_source() -> str:
    return "ANTHROPIC_API_KEY" if os.environ.get("ANTHROPIC_API_KEY") else "none"


def initialize(mode: str, hooks_sent: bool, applied: dict[str, bool] | None = None,
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
        "account": {"tokenSource": "none", "apiKeySource": api_key_source(), "apiProvider": "firstParty"},
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def status(mode: str, session_id: str) -> dict[str, Any]:
    """The frame Claude Code prints after a permission mode change."""
    return {"type": "system", "subtype": "status", "status": None, "permissionMode": mode,
            "uuid": str(uuid.uuid4()), "session_id": session_id}  # fmt: skip


def interrupted(session_id: str) -> dict[str, Any]:
    """The user frame Claude Code prints before the result of an interrupted run."""
    return {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": INTERRUPTED}]},
        "parent_tool_use_id": None,
        "session_id": session_id,
        "uuid": str(uuid.uuid4()),
        "timestamp": _now(),
    }


def user_echo(message: dict[str, Any], session_id: str) -> dict[str, Any]:
    """An SDK user message echoed back (`--replay-user-messages`)."""
    return {**message, "session_id": session_id, "uuid": message.get("uuid") or str(uuid.uuid4()), "timestamp": _now()}


def unsupported(request_id: str, subtype: str) -> dict[str, Any]:
    return error(request_id, f"caliban shim: {subtype} is not supported")
