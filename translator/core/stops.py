"""How a run ended: the agent's `stopped_for` read once, into a result's subtype and error
text, and the texts of the ends the translator itself gives a run (the recovery moves)."""

from __future__ import annotations

from typing import Any

import orjson

TRUNCATED = "the input ended before the run finished (no RunEnd)"
LOST_RUN_END = "a new run started before this one finished (its RunEnd is missing)"
THINKING_BUDGET = "thinking budget exhausted — the model kept reasoning without answering"
# A headless `error` result with no `error` text: the agent always writes one, but a frame
# without it reads (its tests build one).
UNSTATED = "the agent's result states no cause for the error"
# Stops that are errors with a message. ("Error" stands for a headless result's error whose
# origin the headless dialect does not say.)
FAILED_ERRORS = ("ProviderError", "HookDenied", "CompactionFailed", "Refusal", "ContentFilter", "Error")


def variant(stopped_for: Any) -> tuple[str | None, Any]:
    """`stopped_for`'s variant name and its value (None for a unit variant, or no stop at all)."""
    if isinstance(stopped_for, str):
        return stopped_for, None
    if isinstance(stopped_for, dict) and len(stopped_for) == 1:
        ((kind, value),) = stopped_for.items()
        return kind, value
    return None, None


def classify(stopped_for: Any) -> tuple[str, str | None]:
    """Subtype and error text for a `RunEnd.stopped_for`, as the agent's headless driver maps it."""
    if isinstance(stopped_for, str):
        simple = {
            "EndOfTurn": ("success", None),
            "Cancelled": ("cancelled", None),
            "MaxTokensExhausted": ("max_tokens", None),
            "ThinkingBudgetExhausted": ("error", THINKING_BUDGET),
        }
        return simple.get(stopped_for, ("error", f"stopped for {stopped_for}"))
    ((kind, value),) = stopped_for.items()
    if kind == "MaxTurnsReached":
        return "max_turns", None
    if kind == "BudgetExceeded":  # headless input only: the driver's own decision
        return "budget_exceeded", None
    if kind in FAILED_ERRORS:
        return "error", value if isinstance(value, str) else orjson.dumps(value).decode()
    if kind == "StreamIdle" and isinstance(value, dict):
        return "error", f"stream idle for {value.get('secs', 0)}s"
    return "error", f"stopped for {kind}: {orjson.dumps(value).decode()}"
