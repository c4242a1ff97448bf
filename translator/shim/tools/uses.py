"""The tool calls caliban announced (its `tool_use` lines), for the relay to name a call by the
model's `tool_use_id`: caliban's MCP client sends `tools/call` with the tool's name and input
only, and the app's hooks, `can_use_tool` and handler (`_meta`) are told the id."""

from __future__ import annotations

import threading
import time
from typing import Any


class ToolUses:
    def __init__(self) -> None:
        self._seen: list[tuple[str, str, Any]] = []  # (id, name, input), not yet claimed
        self._changed = threading.Condition()

    def saw(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        with self._changed:
            self._seen.append((tool_use_id, name, tool_input))
            del self._seen[:-256]  # (the calls of other servers and tools are never claimed here)
            self._changed.notify_all()

    def claim(self, name: str, tool_input: Any, wait: float) -> str | None:
        """The id of the oldest unclaimed call of `name` with this input, waiting up to `wait`
        seconds for caliban's line (it may reach the shim after the call)."""
        deadline = time.monotonic() + wait
        with self._changed:
            while True:
                for n, (tid, seen_name, seen_input) in enumerate(self._seen):
                    if seen_name == name and seen_input == tool_input:
                        del self._seen[n]
                        return tid
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
