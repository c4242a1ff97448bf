"""What both dialects share before they are typed: the reasons a line is unusable, JSON
decoding with readable failures, the envelopes events arrive in (ADR 0055) and recorded
stamps (the events' own checks are their classes, in model.py).

Everything here is pure: bytes in, values (or a `BadLine` reason) out.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import orjson

from translator import model as M


class BadLine(Exception):
    """A line that cannot be used: `reason` is what the diagnostic says, `line` its bytes
    (where known), `ends_run` the type of the run's last event it was ("RunEnd", or a headless
    "result"; "" for any other line): a rejected last event still ends its run. Raised inside a
    decode, returned by the readers as a value."""

    def __init__(self, reason: str, line: bytes = b"", ends_run: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.ends_run = ends_run


# How the agent's serde begins a run's last event, a RunEnd or a headless result: a line too
# long, or too broken, to decode is known by it (a rejected last event still ends its run).
LAST_EVENTS = ((b'{"type":"RunEnd"', "RunEnd"), (b'{"type":"result",', "result"))


def last_event(line: bytes) -> str:
    """Which run's last event ("RunEnd", "result") a line begins as the agent writes it, or ""."""
    return next((etype for start, etype in LAST_EVENTS if line.startswith(start)), "")


CUT = "invalid JSON (truncated line)"  # a line cut short: its writer's end, not a bad value


def loads(line: bytes) -> Any:
    """orjson.loads with the failure turned into a readable reason."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if "utf-8" in msg.lower() or "surrogate" in msg.lower():
            raise BadLine("invalid UTF-8") from None
        if msg.startswith("unexpected end of data"):  # a line cut short (a dying writer)
            raise BadLine(CUT) from None
        raise BadLine(f"invalid JSON ({msg})") from None


ENVELOPE_VERSION = 1


def unwrap(value: Any) -> list[Any] | None:
    """The events inside what the agent's MCP and HTTP adapters deliver (ADR 0055): an envelope
    `{"v":1,"event":{…}}`, a JSON array of envelopes (or of bare events), or a whole poll
    response `{"events":[…],"next_cursor":…}`. None when `value` is none of these. An envelope
    whose `v` is not the integer 1 (`true`, `1.0` and `2` are not) is a BadLine among the
    events: one bad event, not a bad line (a poll response's other events are read)."""
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
    events: list[Any] = []
    for item in items:
        if type(item) is dict and "type" not in item and "event" in item and "v" in item:
            version = item["v"]
            if type(version) is not int or version != ENVELOPE_VERSION:
                events.append(BadLine(f"envelope version {orjson.dumps(version).decode()} is not supported "
                                      f"(the integer {ENVELOPE_VERSION})", orjson.dumps(item)))
                continue
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
    if len(texts) == 1:  # the usual turn (once a turn: the same answer, without joining)
        return texts[0], texts[0] or None
    return "".join(texts), next(filter(None, reversed(texts)), None)
