"""The shim's own control requests to the app (`can_use_tool`, `hook_callback`), with the
bodies Claude Code sends (shared/reference/cc-2.1.333/sdk-ts/can_use_tool*.wire.jsonl,
hooks_pretooluse, sdk-wire/query_callbacks), and the wait for each answer.

An answer is a `control_response` that the stdin reader hands to `answer()`. An interrupt, or
the shim stopping, `cancel()`s every wait: the run they belonged to is over.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Answer = dict[str, Any] | None  # the response body; None: cancelled, or the app answered an error


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class AppChannel:
    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[threading.Event, list[Answer]]] = {}
        self.errors: list[str] = []  # the app's error answers, for a warning

    def ask(self, request: dict[str, Any]) -> Answer:
        """Send a control request and wait for its answer (the app decides in its own time)."""
        rid = str(uuid.uuid4())
        done, box = threading.Event(), list[Answer]([None])
        with self._lock:
            self._waiting[rid] = (done, box)
        self._send({"type": "control_request", "request_id": rid, "request": request})
        done.wait()
        return box[0]

    def notify(self, frame: dict[str, Any]) -> None:
        """A frame that wants no answer (a session state change)."""
        self._send(frame)

    def answer(self, message: dict[str, Any]) -> None:
        response = message.get("response")
        if not isinstance(response, dict):
            return
        with self._lock:
            waiting = self._waiting.pop(str(response.get("request_id", "")), None)
        if waiting is None:
            return  # (late, or not ours)
        done, box = waiting
        if response.get("subtype") == "success":
            body = response.get("response")
            box[0] = body if isinstance(body, dict) else {}
        else:
            self.errors.append(str(response.get("error", "error")))
        done.set()

    def cancel(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for done, _ in waiting:
            done.set()


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
