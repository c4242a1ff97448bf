"""What both dialects share before they are typed: the reasons a line is unusable, JSON
decoding with readable failures, the envelopes events arrive in (ADR 0055), recorded stamps,
and the shape checks of the headless frames the fold reads (the raw events' checks are their
classes, in model.py).

Everything here is pure: bytes in, dicts (or a `BadLine` reason) out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Any

import orjson

from translator import model as M

Event = dict[str, Any]  # a headless frame, decoded


class BadLine(Exception):
    """A line that cannot be used; `reason` is what the diagnostic says."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_count(v: object) -> bool:
    return type(v) is int and 0 <= v <= M.U32_MAX


def _is_ms(v: object) -> bool:
    """A millisecond figure (headless `t_ms`): a number in the range of a duration."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= M.MAX_DURATION_S * 1000


def _is_amount(v: object) -> bool:
    """A cost in dollars: a finite number, not negative (JSON has no NaN, and no infinity)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")


def _is_blocks_or_text(v: object) -> bool:
    return type(v) is list or type(v) is str


# A field's shape: a type (the value must be exactly of it) or a predicate.
Shape = type | Callable[[object], bool]
# The headless frames the fold reads (headless_reader.py), as far as it uses them: required
# keys and their shapes, then keys checked only when present.
SHAPES: dict[str, tuple[tuple[str, Shape], ...]] = {
    "text": (("delta", str),),
    "thinking": (("delta", str),),
    "tool_use": (("id", str), ("name", str)),
    "tool_result": (("tool_use_id", str), ("is_error", bool), ("content", _is_blocks_or_text)),
    "message": (("content", list),),
    "result": (("subtype", str),),
}
OPTIONAL: dict[str, tuple[tuple[str, Shape], ...]] = {
    "tool_result": (("t_ms", _is_ms),),
    "result": (
        ("turns", _is_count),
        ("total_input_tokens", _is_count),
        ("total_output_tokens", _is_count),
        ("turns_without_edit", _is_count),
        ("total_cost_usd", _is_amount),
    ),
}

# What a range-checked field must hold, for the diagnostic.
HINTS: dict[Shape, str] = {
    _is_count: f" (a whole number 0 to {M.U32_MAX})",
    _is_ms: f" (milliseconds, 0 to {M.MAX_DURATION_S * 1000})",
    _is_amount: " (a number, not negative)",
}


def loads(line: bytes) -> Any:
    """orjson.loads with the failure turned into a readable reason."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if "utf-8" in msg.lower() or "surrogate" in msg.lower():
            raise BadLine("invalid UTF-8") from None
        if msg.startswith("unexpected end of data"):  # a line cut short (a dying writer)
            raise BadLine("invalid JSON (truncated line)") from None
        raise BadLine(f"invalid JSON ({msg})") from None


def _fits(value: object, shape: Shape) -> bool:
    return type(value) is shape if type(shape) is type else shape(value)


def check(ev: Event, etype: str) -> Event:
    """Raise BadLine unless the headless frame `ev` has the shape its type requires."""
    for key, shape in SHAPES.get(etype, ()):
        try:
            value = ev[key]
        except KeyError:
            raise BadLine(f"{etype} without {key!r}") from None
        if not _fits(value, shape):
            raise BadLine(f"{etype} has a malformed {key!r}{HINTS.get(shape, '')}")
    for key, shape in OPTIONAL.get(etype, ()):
        if key in ev and not _fits(ev[key], shape):
            raise BadLine(f"{etype} has a malformed {key!r}{HINTS.get(shape, '')}")
    if "ts" in ev or "timestamp" in ev:
        stamp_s(ev.get("ts"), ev.get("timestamp"))
    return ev


ENVELOPE_VERSION = 1


def unwrap(value: Any) -> list[Any] | None:
    """The events inside what the agent's MCP and HTTP adapters deliver (ADR 0055): an envelope
    `{"v":1,"event":{…}}`, a JSON array of envelopes (or of bare events), or a whole poll
    response `{"events":[…],"next_cursor":…}`. None when `value` is none of these."""
    if type(value) is dict and "type" not in value:
        if "event" in value and "v" in value:
            items: list[Any] = [value]
        elif type(value.get("events")) is list:
            items = value["events"]
        else:
            return None
    elif type(value) is list and all(type(item) is dict for item in value):
        items = value
    else:
        return None
    events = []
    for item in items:
        if type(item) is dict and "type" not in item and "event" in item and "v" in item:
            if item["v"] != ENVELOPE_VERSION:
                raise BadLine(f"envelope version {item['v']!r} is not supported")
            item = item["event"]
        events.append(item)
    return events


def not_an_event(value: Any) -> str:
    """Why a decoded value that is neither an event nor an envelope is no event."""
    if type(value) is not dict:
        return "not a JSON object"
    return "no 'type' key" if "type" not in value else "'type' is not a string"


def stamp_s(ts: Any, stamp: Any) -> float | None:
    """A recorded time in Unix seconds: a numeric `ts`, or an ISO-8601 `timestamp`; None when
    there is neither. A stamp outside 1970..9999 is a BadLine: no result could show it."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        if not 0 <= ts <= M.MAX_STAMP_S:
            raise BadLine("'ts' is out of range (Unix seconds, 1970 to 9999)")
        return float(ts)
    if type(stamp) is str:
        from datetime import datetime  # only recorded logs pay for it

        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp()
        if not 0 <= seconds <= M.MAX_STAMP_S:
            raise BadLine("'timestamp' is out of range (1970 to 9999)")
        return seconds
    return None


def timestamp_s(ts: Any, stamp: Any) -> float | None:
    """`stamp_s` where an unusable stamp counts as none (its line was checked already)."""
    try:
        return stamp_s(ts, stamp)
    except BadLine:
        return None


def reply(content: list[Any]) -> tuple[str, str | None]:
    """A message's text blocks joined (what the agent calls its reply), and its last non-empty
    text block (what Claude Code calls its result)."""
    texts = [b["text"] for b in content if type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str]
    return "".join(texts), next((t for t in reversed(texts) if t), None)
