"""The relayed calls, for the frames to name each by the id its hooks, `can_use_tool` and
handler (`_meta`) were told. caliban's MCP client sends `tools/call` with the tool's name and
input only, and its stream-json encoder writes the call's `tool_use` line only once the call
has returned (headless/encoder.rs, at ToolCallEnd): the relay cannot learn the model's id in
time, so it gives each call an id of its own at once, and when caliban's line comes, the
frames' id for it (caliban's, the provider's) is renamed to the relay's."""

from __future__ import annotations

import threading
import uuid
from typing import Any

KEPT = 256  # relayed calls remembered until caliban's line names them (others' lines never do)


class ToolUses:
    def __init__(self) -> None:
        self._relayed: list[tuple[str, str, Any]] = []  # (the relay's id, name, input), not yet named by caliban
        self._lock = threading.Lock()

    def clear(self) -> None:
        """A new run: a call of the last that caliban never named (it was stopped) names none of this one's."""
        with self._lock:
            self._relayed.clear()

    def relayed(self, name: str, tool_input: Any) -> str:
        """A call reached the relay: its id, made now."""
        tid = f"toolu_{uuid.uuid4().hex[:24]}"
        with self._lock:
            self._relayed.append((tid, name, tool_input))
            del self._relayed[:-KEPT]
        return tid

    def named(self, name: str, tool_input: Any) -> str | None:
        """caliban's `tool_use` line for a call of `name` with this input: the id the relay gave
        the oldest such call it relayed (None: not one of the relay's)."""
        with self._lock:
            for n, (tid, relayed_name, relayed_input) in enumerate(self._relayed):
                if relayed_name == name and relayed_input == tool_input:
                    del self._relayed[n]
                    return tid
        return None
