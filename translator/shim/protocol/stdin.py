"""The app's stdin as the shim reads it: numbered NDJSON lines, each bounded, and decoded.

A line longer than `STDIN_LINE` is never held whole (translator.core.lines streams the rest of it
away): what it was is read from its first bytes, so that a user message still gets its error
result and a control request its error answer. A string with an unpaired surrogate escape
(`"\\ud800"`, which orjson refuses) is decoded with the escape replaced by U+FFFD, and said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from translator.core.lines import LineBuffer

STDIN_LINE = 64 << 20  # bytes of one stdin line (the Messages API takes requests up to 32 MB)
HEAD = 512  # bytes at the head of an over-long line read for its type and request id (an SDK's answer
# puts `request_id` after `type`, `response` and `subtype`, each spaced: past LineBuffer's 80)
_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]+)"')
_REQUEST_ID = re.compile(rb'"request_id"\s*:\s*"([^"\\]{0,200})"')


@dataclass(frozen=True)
class TooLong:
    """An over-long line: why it was skipped, and what its head says it was."""

    reason: str
    kind: str | None
    request_id: str | None
    head: bytes = b""  # its first bytes (up to HEAD)


def _too_long(reason: str, excerpt: bytes) -> TooLong:
    kind = _TYPE.search(excerpt)
    rid = _REQUEST_ID.search(excerpt)
    return TooLong(
        reason, kind and kind.group(1).decode(), rid and rid.group(1).decode("utf-8", "replace"), excerpt
    )  # fmt: skip


def lines(read: Callable[[], bytes], limit: int = STDIN_LINE) -> Iterator[tuple[int, bytes | TooLong]]:
    """(number, line) until `read()` gives b""; an over-long line comes as a TooLong."""
    skipped: list[TooLong] = []
    head = bytearray()  # the first HEAD bytes of the line being skipped: LineBuffer's excerpt is shorter

    def rejected(piece: bytes) -> None:
        if piece == b"\n":  # (the skipped line's end)
            return
        head.extend(piece[: HEAD - len(head)])

    def skip(reason: str, excerpt: bytes) -> None:
        skipped.append(_too_long(reason, bytes(head)))
        head.clear()

    buf = LineBuffer(limit, rejected, skip)
    n = 0

    def numbered(found: list[bytes | TooLong]) -> Iterator[tuple[int, bytes | TooLong]]:
        nonlocal n
        for item in found:
            n += 1
            if isinstance(item, bytes) and len(item) > limit:
                item = _too_long(f"line longer than {limit} bytes ({len(item)} bytes)", item[:HEAD])
            yield n, item

    while chunk := read():
        line, data, pos = buf.head(chunk)
        found: list[bytes | TooLong] = [*skipped, *([] if line is None else [line])]
        skipped.clear()
        if data is not None:
            while (nl := data.find(b"\n", pos)) >= 0:
                found.append(data[pos:nl])
                pos = nl + 1
            if pos < len(data):
                buf.hold(data[pos:])
        yield from numbered(found)
    last = buf.finish()
    yield from numbered([*skipped, *([] if last is None else [last])])


def decode(line: bytes) -> tuple[Any, bool]:
    """The line's JSON value, and whether an unpaired surrogate escape was replaced in it.
    Raises ValueError for a line that is not JSON."""
    try:
        return orjson.loads(line), False
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise
    return _mend(json.loads(line)), True  # (the standard library keeps unpaired surrogates)


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_mend(item) for item in value]
    if isinstance(value, dict):
        return {_mend(key): _mend(item) for key, item in value.items()}
    return value
