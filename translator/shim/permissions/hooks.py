"""The app's hook callbacks (from `initialize`), matched and read as Claude Code does.

Which fire on the drive path: `PreToolUse` for the tools caliban asks about (before
`can_use_tool`), `PostToolUse` at each tool's end, `UserPromptSubmit` before each message,
`Stop` at each result. The rest (PreCompact, SubagentStart, Notification, ...) have no event
on the drive surface and never fire; docs/shim.md says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from translator.shim.limits import HOOK_S
from translator.shim.protocol.initialize import HookMatcher

FIRED = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop")
Decision = Literal["deny", "unknown", "defer", "ask", "allow"]
Verdict = Decision | None
# Between several hooks, as Claude Code ranks them (deny > defer > ask > allow); a decision the
# shim does not know ("unknown": a typo, a newer CLI's) ranks as a deny: it never lets a tool run.
PRECEDENCE: tuple[Decision, ...] = ("deny", "unknown", "defer", "ask", "allow")
KNOWN = ("allow", "deny", "ask", "defer")
LEGACY = {"approve": "allow", "block": "deny"}  # the older top-level `decision`


class Hooks:
    def __init__(self, config: Mapping[str, Sequence[HookMatcher]], timeout: float = HOOK_S) -> None:
        """`config`: what the SDK's initialize registered (initialize.py's `hooks`); `timeout`:
        seconds a callback may take when its matcher sets none (Claude Code's 60)."""
        self._table: dict[str, list[tuple[str | None, tuple[str, ...], float]]] = {
            event: [(m.matcher, m.callback_ids, m.timeout or timeout) for m in ms] for event, ms in config.items() if ms
        }
        # the callbacks whose matcher says onFailure "block": one that fails or times out denies its tool
        self._blocking = {c for ms in config.values() for m in ms if m.on_failure == "block" for c in m.callback_ids}

    def blocks(self, callback: str) -> bool:
        return callback in self._blocking

    def unfired(self) -> list[str]:
        """The events the app registered that the drive path never raises."""
        return sorted(e for e in self._table if e not in FIRED)

    def callbacks(self, event: str, tool: str | None = None) -> list[tuple[str, float]]:
        """The callback ids for `event` (for a tool event, those whose matcher takes `tool`),
        each with its matcher's timeout."""
        found: list[tuple[str, float]] = []
        for matcher, ids, timeout in self._table.get(event, []):
            if tool is None or _takes(matcher, tool):
                found += [(callback, timeout) for callback in ids]
        return found


def _takes(matcher: str | None, tool: str) -> bool:
    """No matcher, `""` or `*` takes every tool; otherwise a name, `A|B`, or a regex."""
    if matcher in (None, "", "*"):
        return True
    assert matcher is not None
    if re.fullmatch(r"[\w|]+", matcher):
        return tool in matcher.split("|")
    try:
        return re.fullmatch(matcher, tool) is not None
    except re.error:
        return matcher == tool


def pre_tool_verdict(outputs: list[dict[str, Any]]) -> tuple[Verdict, str]:
    """What PreToolUse hooks decided between them, by PRECEDENCE; with the reason (for
    "unknown": the decision given, repr'd)."""
    verdicts: list[tuple[str, str]] = []
    for out in outputs:
        specific = out.get("hookSpecificOutput")
        decision = specific.get("permissionDecision") if isinstance(specific, dict) else None
        reason = specific.get("permissionDecisionReason") if isinstance(specific, dict) else None
        legacy = out.get("decision")
        if decision is None and legacy is not None:
            decision = LEGACY.get(legacy, legacy) if isinstance(legacy, str) else legacy
        if decision in KNOWN:
            verdicts.append((str(decision), str(reason or out.get("reason") or "")))
        elif decision is not None:
            verdicts.append(("unknown", repr(decision)))
    for wanted in PRECEDENCE:
        for decision, reason in verdicts:
            if decision == wanted:
                return wanted, reason
    return None, ""


def blocked(outputs: list[dict[str, Any]]) -> str | None:
    """A UserPromptSubmit hook that blocked the prompt (`decision: block`): its reason."""
    for out in outputs:
        if out.get("decision") == "block":
            return str(out.get("reason") or out.get("stopReason") or "blocked by a UserPromptSubmit hook")
    return None
