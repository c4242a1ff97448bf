"""What a hook's output says beyond a decision, read as Claude Code reads it
(shared/reference/cc-2.1.333/hooks-output/): `systemMessage` is shown to the app (a
`system/informational` frame, never to the model), `continue: false` stops the run (for
UserPromptSubmit before the model is asked, for PreToolUse after the tool), and
`additionalContext` is the model's: caliban takes it only with the user's message."""

from __future__ import annotations

import uuid
from typing import Any

from translator.shim.protocol.frames import now


def informational(content: str, level: str, session_id: str, **extra: Any) -> dict[str, Any]:
    """Claude Code's frame for what a hook says to the user."""
    return {"type": "system", "subtype": "informational", "content": content, "level": level, **extra,
            "uuid": str(uuid.uuid4()), "session_id": session_id, "written_at": now()}  # fmt: skip


def system_messages(outputs: list[dict[str, Any]]) -> list[str]:
    return [out["systemMessage"] for out in outputs if isinstance(out.get("systemMessage"), str)]


def stop_reason(outputs: list[dict[str, Any]]) -> str | None:
    """`continue: false`: the run stops; its `stopReason` ("" when none was given)."""
    for out in outputs:
        if out.get("continue") is False:
            return str(out.get("stopReason") or "")
    return None


def contexts(outputs: list[dict[str, Any]]) -> list[str]:
    """The `additionalContext` of each output (in `hookSpecificOutput`)."""
    found = []
    for out in outputs:
        specific = out.get("hookSpecificOutput")
        context = specific.get("additionalContext") if isinstance(specific, dict) else None
        if isinstance(context, str) and context:
            found.append(context)
    return found


def with_context(prompt: str, event: str, found: list[str]) -> str:
    """The user's message with a UserPromptSubmit hook's context, as Claude Code words it."""
    notes = "".join(f"\n\n<system-reminder>\n{event} hook additional context: {c}\n</system-reminder>" for c in found)
    return prompt + notes
