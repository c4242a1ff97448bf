"""An interactive drive run cut into one run per user message, for the translator's core.

caliban's interactive run has one `RunEnd` for the whole conversation, and `turn_index` keeps
counting across messages; Claude Code prints a result per message. So each message's events
become a run of their own: turn indexes counted from the message's first turn, and a `RunEnd`
at the message's boundary (`awaiting_input`) with the usage and turns of that message alone.
Pure: events in, raw-dialect lines out.
"""

from __future__ import annotations

from typing import Any

import orjson

COUNTERS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class Segments:
    def __init__(self) -> None:
        self._base: int | None = None  # the turn_index of the message's first turn
        self._turns = 0
        self._usage: dict[str, int] = {}
        self._pending = False  # a message began and has not had its RunEnd

    def begin(self) -> None:
        """A user message was sent: what follows is its run."""
        self._base, self._turns, self._usage, self._pending = None, 0, {}, True

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def turns(self) -> int:
        """The message's API calls so far (its TurnEnds)."""
        return self._turns

    def event(self, event: dict[str, Any]) -> bytes | None:
        """One drive event → the line the core folds (None: nothing, e.g. the conversation's
        own `RunEnd` after the last message's boundary)."""
        kind = event.get("type")
        if kind == "RunEnd":  # caliban ended the conversation's run (end of input, an error, max turns)
            return self.close(event.get("stopped_for", "EndOfTurn"))
        if not self._pending:
            return None  # (no message is open: nothing of caliban's arrives here)
        index = event.get("turn_index")
        if isinstance(index, int):
            if self._base is None:
                self._base = index
            event = {**event, "turn_index": index - self._base}
        if kind == "TurnEnd":
            self._turns += 1
            usage = event.get("usage")
            for key in COUNTERS:
                value = usage.get(key) if isinstance(usage, dict) else None
                if isinstance(value, int):
                    self._usage[key] = self._usage.get(key, 0) + value
        return orjson.dumps(event) + b"\n"

    def close(self, stopped_for: Any = "EndOfTurn") -> bytes | None:
        """The message's run ends here (once): its `RunEnd`, with the message's own totals."""
        if not self._pending:
            return None
        self._pending = False
        usage = {"input_tokens": 0, "output_tokens": 0, **self._usage}
        run_end = {"type": "RunEnd", "final_messages": [], "total_usage": usage, "turn_count": self._turns,
                   "stopped_for": stopped_for, "turns_without_edit": 0, "no_edit_nudge_emitted": False}  # fmt: skip
        return orjson.dumps(run_end) + b"\n"
