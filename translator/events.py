"""The agent's raw event dialect (caliban `TurnEvent` NDJSON): decoding and shape checks.

Everything here is pure: bytes in, dicts (or a `BadLine` reason) out. How the bytes are laid
out (and read fast because of it) is raw_reader's business.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from operator import methodcaller
from typing import Any

import orjson

Event = dict[str, Any]

TURN_START = "TurnStart"
TEXT_DELTA = "AssistantTextDelta"
THINKING_DELTA = "AssistantThinkingDelta"
TOOL_START = "ToolCallStart"
TOOL_INPUT = "ToolCallInputDelta"
TOOL_END = "ToolCallEnd"
TURN_END = "TurnEnd"
RUN_END = "RunEnd"

class BadLine(Exception):
    """A line that cannot be used; `reason` is what the diagnostic says."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Range limits. The agent's token counts and turn numbers are u32. A duration or a stamp must
# come out as finite milliseconds and a time a result can show (datetime ends with year 9999);
# a duration beyond u32 seconds (136 years) is no span the agent measured.
U32_MAX = (1 << 32) - 1
MAX_DURATION_S = U32_MAX
MAX_STAMP_S = 253402300799  # 9999-12-31T23:59:59Z


def _is_count(v: object) -> bool:
    return type(v) is int and 0 <= v <= U32_MAX


def _is_ms(v: object) -> bool:
    """A millisecond figure (headless `t_ms`): a number in the range of a duration."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_DURATION_S * 1000


def _is_amount(v: object) -> bool:
    """A cost in dollars: a finite number, not negative (JSON has no NaN, and no infinity)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")


def _is_message(v: object) -> bool:
    return type(v) is dict and type(v.get("content")) is list


def _is_usage(v: object) -> bool:
    if type(v) is not dict or "input_tokens" not in v or "output_tokens" not in v:
        return False
    return all(map(_is_count, v.values()))


def _is_duration(v: object) -> bool:
    """A serde `Duration` ({secs, nanos}) or null."""
    return v is None or (type(v) is dict and _is_span(v))


def _is_span(v: dict[Any, Any]) -> bool:
    secs, nanos = v.get("secs"), v.get("nanos")
    return type(secs) is int and type(nanos) is int and 0 <= secs <= MAX_DURATION_S and 0 <= nanos <= U32_MAX


def _is_blocks_or_text(v: object) -> bool:
    return type(v) is list or type(v) is str


def _is_stop(v: object) -> bool:
    """`stopped_for`: a unit variant, or a one-key map whose numbers are in range."""
    if type(v) is str:
        return True
    if type(v) is not dict or len(v) != 1:
        return False
    ((kind, value),) = v.items()
    if kind == "StreamIdle":
        return type(value) is dict and _is_span(value)
    return kind != "MaxTurnsReached" or _is_count(value)


def _is_opt_str(v: object) -> bool:
    return v is None or type(v) is str


CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")

# A field's shape: a type (the value must be exactly of it) or a predicate.
Shape = type | Callable[[object], bool]
# Required keys and their shapes, per event type.
SHAPES: dict[str, tuple[tuple[str, Shape], ...]] = {
    TURN_START: (("turn_index", int), ("message_id", str), ("model", str)),
    TEXT_DELTA: (("turn_index", int), ("content_block_index", int), ("text", str)),
    THINKING_DELTA: (("turn_index", int), ("content_block_index", int), ("text", str)),
    TOOL_START: (("turn_index", int), ("tool_use_id", str), ("name", str)),
    TOOL_INPUT: (("turn_index", int), ("tool_use_id", str), ("partial_json", str)),
    TOOL_END: (("turn_index", int), ("tool_use_id", str), ("is_error", bool), ("content", list)),
    TURN_END: (
        ("turn_index", int),
        ("assistant_message", _is_message),
        ("stop_reason", _is_opt_str),
        ("usage", _is_usage),
        ("ttft", _is_duration),
        ("tbt", _is_duration),
    ),
    RUN_END: (("total_usage", _is_usage), ("turn_count", _is_count), ("stopped_for", _is_stop)),
}
# The headless stream-json frames the fold reads (headless.py), as far as it uses them.
SHAPES.update(
    {
        "text": (("delta", str),),
        "thinking": (("delta", str),),
        "tool_use": (("id", str), ("name", str)),
        "tool_result": (("tool_use_id", str), ("is_error", bool), ("content", _is_blocks_or_text)),
        "message": (("content", list),),
        "result": (("subtype", str),),
    }
)
# Keys with serde defaults: checked only when present.
OPTIONAL: dict[str, tuple[tuple[str, Shape], ...]] = {
    RUN_END: (("turns_without_edit", _is_count), ("no_edit_nudge_emitted", bool)),
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
_COUNTS = f"whole numbers 0 to {U32_MAX}"
HINTS: dict[Shape, str] = {
    _is_count: f" (a whole number 0 to {U32_MAX})",
    _is_usage: f" (input_tokens and output_tokens, {_COUNTS})",
    _is_duration: f" (null or secs and nanos, {_COUNTS})",
    _is_stop: f" (a variant name, or one variant with its value; numbers {_COUNTS})",
    _is_ms: f" (milliseconds, 0 to {MAX_DURATION_S * 1000})",
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
        raise BadLine(f"invalid JSON ({msg})") from None


def _fits(value: object, shape: Shape) -> bool:
    return type(value) is shape if type(shape) is type else shape(value)


def _plan(shapes: tuple[tuple[str, Shape], ...]) -> tuple[tuple[str, ...], tuple[type, ...], tuple[tuple[str, Callable[[object], bool]], ...]]:
    """Split a shape list into exact-type fields (checked by one C-level map) and predicates."""
    typed = [(k, s) for k, s in shapes if type(s) is type]
    preds = tuple((k, s) for k, s in shapes if type(s) is not type)
    return tuple(k for k, _ in typed), tuple(s for _, s in typed), preds


_PLANS = {etype: _plan(shapes) for etype, shapes in SHAPES.items() if etype not in OPTIONAL}


def check(ev: Event, etype: str, skipped: str | None = None) -> Event:
    """Raise BadLine unless `ev` has the shape its type requires (`skipped` is not checked)."""
    plan = _PLANS.get(etype)
    if plan is not None:
        keys, types, preds = plan
        if tuple(map(type, map(ev.get, keys))) == types:
            for key, ok in preds:
                if key != skipped and (key not in ev or not ok(ev[key])):
                    break
            else:
                return _in_range(ev)
    for key, shape in SHAPES.get(etype, ()):
        if key == skipped:
            continue
        try:
            value = ev[key]
        except KeyError:
            raise BadLine(f"{etype} without {key!r}") from None
        if not _fits(value, shape):
            raise BadLine(f"{etype} has a malformed {key!r}{HINTS.get(shape, '')}")
    for key, shape in OPTIONAL.get(etype, ()):
        if key in ev and not _fits(ev[key], shape):
            raise BadLine(f"{etype} has a malformed {key!r}{HINTS.get(shape, '')}")
    return _in_range(ev)


INDEXES = ("turn_index", "content_block_index")  # u32, typed `int` in SHAPES for the fast check


def _in_range(ev: Event) -> Event:
    """The range checks a shape's types leave: indexes and the recorded stamp."""
    for key in INDEXES:
        value = ev.get(key)
        if type(value) is int and not 0 <= value <= U32_MAX:
            raise BadLine(f"{ev.get('type')} has a malformed {key!r}{HINTS[_is_count]}")
    if "ts" in ev or "timestamp" in ev:
        stamp_s(ev)
    return ev


def all_fit(evs: list[Any], etypes: tuple[str, ...]) -> bool:
    """Whether every decoded value is an event of one of `etypes` (types whose shapes are plain
    types) with every field of the right type: one C-level pass per field, for batches."""
    if len(evs) < 8:  # a few: checked one by one, cheaper than the set-up below
        try:
            return all(type(ev) is dict and ev.get("type") in etypes and check(ev, ev["type"]) for ev in evs)
        except BadLine:
            return False
    if set(map(type, evs)) != {dict} or not set(map(_GET_TYPE, evs)) <= set(etypes):
        return False
    keys, types, _ = _PLANS[etypes[0]]
    return all(
        set(map(type, map(methodcaller("get", key), evs))) <= {shape}
        for key, shape in zip(keys, types, strict=True)
    ) and all(
        min(values) >= 0 and max(values) <= U32_MAX
        for values in (list(map(methodcaller("get", key), evs)) for key in INDEXES if key in keys)
    )


_GET_TYPE = methodcaller("get", "type")


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


def parse(line: bytes) -> Event:
    """Full decode and shape check of one line."""
    ev = loads(line)
    if type(ev) is not dict:
        raise BadLine("not a JSON object")
    etype = ev.get("type")
    if etype is None:
        raise BadLine("no 'type' key")
    if type(etype) is not str:
        raise BadLine("'type' is not a string")
    return check(ev, etype)


def duration_s(d: dict[str, int] | None) -> float:
    """A serde `Duration` ({secs, nanos}) in seconds; null is 0."""
    if not d:
        return 0.0
    return d["secs"] + d["nanos"] / 1e9


def stamp_s(ev: Event) -> float | None:
    """The event's recorded time in Unix seconds: a numeric `ts`, or an ISO-8601 `timestamp`;
    None when it has neither. A stamp outside 1970..9999 is a BadLine: no result could show it."""
    ts = ev.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        if not 0 <= ts <= MAX_STAMP_S:
            raise BadLine("'ts' is out of range (Unix seconds, 1970 to 9999)")
        return float(ts)
    stamp = ev.get("timestamp")
    if type(stamp) is str:
        from datetime import datetime  # only recorded logs pay for it

        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp()
        if not 0 <= seconds <= MAX_STAMP_S:
            raise BadLine("'timestamp' is out of range (1970 to 9999)")
        return seconds
    return None


def timestamp_s(ev: Event) -> float | None:
    """`stamp_s` for an event read lazily (a delta line never decoded before): an unusable
    stamp counts as none."""
    try:
        return stamp_s(ev)
    except BadLine:
        return None


def has_timestamp(ev: Event) -> bool:
    return timestamp_s(ev) is not None


def reply(message: Event) -> tuple[str, str | None]:
    """A Message's text blocks joined (what the agent calls its reply), and its last non-empty
    text block (what Claude Code calls its result)."""
    texts = [
        b["text"]
        for b in message["content"]
        if type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str
    ]
    return "".join(texts), next((t for t in reversed(texts) if t), None)
