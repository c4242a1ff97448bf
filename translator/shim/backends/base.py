"""What a backend is to the session (session.py): the one protocol both implement, the
`caliban -p` backend (oneshot/) and the `caliban mcp serve` backend (drive/), and the
`RunContext` each is handed once. The session owns the app channel and the lifetime; a backend
owns caliban. Which backend runs is choose.py's, which the session holds as one `Chosen`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from translator.encoders.observed import Observer
    from translator.shim.mapping import Plan
    from translator.shim.permissions.policy import Policy
    from translator.shim.place import Place
    from translator.shim.protocol.channel import Channel
    from translator.shim.protocol.initialize import HookMatcher, Initialize
    from translator.shim.sessions import Session


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a backend needs of its session, handed in once: each backend makes its own gate
    (permissions/gate.py) of the policy, `can_use_tool` and the channel."""

    binary: str  # caliban
    plan: Plan
    files: Session  # the session's id and files
    channel: Channel  # the app: frames written (`write`, `send`), requests asked, waits cancelled
    observer: Observer | None  # the session's watch (its file, telemetry)
    model: Callable[[], str | None]  # the session's model as the app last set it
    mode: Callable[[], str]  # and its permission mode
    policy: Policy  # the session's mode and tool rules
    can_use_tool: bool  # the app answers permission prompts (`--permission-prompt-tool stdio`)
    warn: Callable[[str], None]
    place: Place  # the session's environment and folder (caliban is started with them; a claim moves the folder)


class Backend(Protocol):
    @property
    def last_is_error(self) -> bool:
        """Whether the last result was an error (the exit status says it)."""

    def run_message(self, prompt: str) -> None:
        """One user message to its result (always exactly one, written as it comes)."""

    def refuse(self, why: str) -> None:
        """A message that cannot be run: its result is this error alone."""

    def interrupt(self) -> None:
        """The app's interrupt: end the message being run (its result says cancelled), and
        deny every later call of its run."""

    def input_ended(self) -> None:
        """The app's input ended: a gate that asks the app denies from now on."""

    def set_hooks(self, config: Mapping[str, Sequence[HookMatcher]], timeout: float) -> None:
        """The app's hook callbacks (from `initialize`), for the backend's gate; `timeout`:
        seconds one may take when its matcher sets none."""

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The body of the success answer to a control request the backend holds (`mcp_status`,
        `set_model`); None: not one of its."""

    def finish(self) -> None:
        """The app's input ended: end what runs, in order."""

    def kill(self, waiting: Callable[[float], bool]) -> None:
        """End caliban now, all of it; `waiting(s)` waits up to s for the worker and says
        whether it still runs."""


class Relaying(Backend, Protocol):
    """The `caliban -p` backend, which also relays the app's SDK MCP servers to caliban."""

    @property
    def relays(self) -> bool:
        """Whether any of the app's servers is relayed."""

    def relay(self, manifests: dict[str, dict[str, Any]]) -> list[str]:
        """The plan's SDK servers relayed (their manifests, when the app sent them): the ones new."""

    def ready(self, then: Callable[[], None]) -> None:
        """`then` once the relayed servers' handshake with the app is had (now, if none is due)."""

    def close(self) -> None:
        """The session is over: the relays' socket removed."""


class Probing(Backend, Protocol):
    """The `caliban mcp serve` backend, which may be missing from the caliban installed."""

    def probe(self) -> str | None:
        """Start caliban's server: None, or why it cannot run."""


class Chosen(Backend, Protocol):
    """The backend the session holds (choose.py's): one of the two, as the session's facts choose it."""

    def initialize(self, init: Initialize, warnings: list[str]) -> tuple[list[str], bool]:
        """The app's `initialize` (configure.py has applied it to the plan, with `warnings`):
        the warnings as the choice makes them, and whether hook callbacks go uncalled."""

    def ready(self, then: Callable[[], None]) -> None:
        """`then` (the initialize answer) once the backend can take the app's messages."""

    def close(self) -> None:
        """The session is over."""
