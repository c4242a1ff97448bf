"""The agent's `TurnEvent` variants as typed, immutable classes, decoded and checked in C.

One class per serde variant (the tag is the `type` value), with the agent's own field types and
ranges (u32 counts). Decoding into them is the check: a value that decodes is well-formed JSON,
valid UTF-8, and has every field, of the right type and range. Today the text/thinking deltas
(the bulk of a stream) are checked here, a run of them per call; sub-documents nobody reads
whole (a run's history) are checked as JSON without being built (`valid_json`). Imports
nothing of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Raw, Struct

U32_MAX = (1 << 32) - 1
MAX_STAMP_S = 253402300799  # 9999-12-31T23:59:59Z: datetime's last second

WALL, RECORDED, ESTIMATED = "wall", "recorded", "estimated"  # the clocks a stream is timed by

U32 = Annotated[int, Meta(ge=0, le=U32_MAX)]
Stamp = Annotated[float, Meta(ge=0, le=MAX_STAMP_S)]


class Event(Struct, frozen=True, kw_only=True, tag_field="type", forbid_unknown_fields=True, gc=False):
    """A `TurnEvent`. A recorded log may stamp each one (`ts`, Unix seconds). A field serde
    does not write (a `timestamp`, whose check needs a date parser) is not vouched for here:
    such a line is decoded whole instead. Untracked by the garbage collector (`gc=False`: no
    field can hold a container, so no cycle), which makes a batch of them cheaper to build."""

    ts: Stamp | None = None


class AssistantTextDelta(Event, frozen=True, tag=True):
    turn_index: U32
    content_block_index: U32
    text: str


class AssistantThinkingDelta(Event, frozen=True, tag=True):
    turn_index: U32
    content_block_index: U32
    text: str


Delta = AssistantTextDelta | AssistantThinkingDelta

_DELTA = msgspec.json.Decoder(Delta)
_RAW = msgspec.json.Decoder(Raw)


def delta_count(buf: bytes, start: int = 0, end: int | None = None) -> int:
    """How many text/thinking deltas the newline-separated lines `buf[start:end]` hold, each
    checked in full (types, u32 ranges, UTF-8, a `ts` in range), decoded as one batch in one C
    call without a copy; -1 if any is not one. The values are counted, not the lines: two
    deltas glued on one line count 2, so the caller compares this with its line count."""
    try:
        return len(_DELTA.decode_lines(memoryview(buf)[start:end]))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return -1


def valid_json(value: bytes) -> bool:
    """Whether `value` is one well-formed JSON value in valid UTF-8 (orjson's rules), checked
    without building it."""
    try:
        _RAW.decode(value)
        if not value.isascii():
            value.decode()
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    # A lone surrogate escape is malformed for orjson; the skip-parse above lets it pass. (No
    # backslash at all, found by memchr, is the common case: then no two slower scans.)
    return b"\\" not in value or (b"\\ud" not in value and b"\\uD" not in value)


@dataclass(frozen=True, slots=True)
class DeltaRun:
    """A run of text/thinking delta lines, checked but handed over undecoded: how many, the
    first one's line number, the last line (for the turn's timing), the lines themselves (b""
    when no output will read them), whether a thinking delta is among them, and how to decode
    them if an output does: every delta (a bad line reported and left out), or, when they are
    all text deltas of one block, that block's index and texts (None otherwise)."""

    count: int
    first_no: int
    last: bytes
    lines: bytes
    thinking: bool
    decode: Callable[[], list[dict[str, Any]]]
    text_block: Callable[[], tuple[int, list[str]] | None]
