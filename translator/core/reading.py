"""What the readers give back (after h11's readers: bytes in, values out, nothing done).

A line is read into what it is — the model's events, a headless frame, a `BadLine` (its reason
and its bytes: errors are values, and the facade's one policy decides what each costs), or a
line passed through as it came — and the facade (translator.py) applies each in order.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from translator import model as M
from translator.core.jsonl import BadLine


class Passthrough(NamedTuple):
    """A line that is JSON with a `type` neither dialect has: written as it came."""

    line: bytes


class Foreign(NamedTuple):
    """A line of Claude Code's own output (its stream-json, or this command's claude-code
    format) given as input: not the agent's, skipped. `first`: the stream's first, said."""

    line: bytes
    first: bool


class Headless(NamedTuple):
    """A headless frame as read: typed and checked, its line, and (for a result, which the
    repair reads whole) every key it has, in order."""

    frame: M.HeadlessFrame
    line: bytes
    whole: dict[str, Any] | None = None


# What a line is read into (a raw event is one of the model's TurnEvent classes).
Item = M.Event | Headless | BadLine | Passthrough | Foreign


class Reader(Protocol):
    """The readers' contract: a stretch of a chunk's complete lines (none blank) in, their
    events out when they all are raw events (the batch, the hot path; None: read them one by
    one); one line (or one event out of an envelope line) in, what it is out. A reader makes
    no move and says nothing."""

    def chunk(self, data: bytes, pos: int, end: int, last: bool) -> tuple[list[M.TurnEvent], list[bytes]] | None: ...
    def read(self, line: bytes) -> list[Item]: ...
