"""What a backend is to the session (session.py): the one protocol both implement, the
`caliban -p` backend (oneshot/) and the `caliban mcp serve` backend (drive/). The session
owns the app channel and the lifetime; a backend owns caliban."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Backend(Protocol):
    @property
    def last_is_error(self) -> bool:
        """Whether the last result was an error (the exit status says it)."""

    def run_message(self, prompt: str) -> None:
        """One user message to its result (always exactly one, written as it comes)."""

    def refuse(self, why: str) -> None:
        """A message that cannot be run: its result is this error alone."""

    def interrupt(self) -> None:
        """The app's interrupt: end the message being run (its result says cancelled)."""

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The body of the success answer to a control request the backend holds (`mcp_status`,
        `set_model`); None: not one of its."""

    def finish(self) -> None:
        """The app's input ended: end what runs, in order."""

    def kill(self, waiting: Callable[[float], bool]) -> None:
        """End caliban now, all of it; `waiting(s)` waits up to s for the worker and says
        whether it still runs."""
