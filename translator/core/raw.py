"""Lines of input → the fold's typed events: every line decoded and checked in C.

The hot path decodes a chunk's complete lines as one batch, each line on its own but all in
C (`map` of the decoder over the lines, so a batch takes exactly what the lines one by one
would), into the model's classes (model.py), and hands the fold the list: a run of deltas, the bulk of a stream, is
then passed on whole (a `DeltaRun`), never one by one. When the batch does not decode — a bad
line, a headless frame, an envelope, an event of a type this build does not know — the same
lines are taken one at a time, where each is decoded alone, reported with its own line number
and reason, or handed to the headless reader, unwrapped, or passed through.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec
import orjson

from translator import model as M
from translator.core import jsonl as E
from translator.core.headless import HINTS as FRAME_HINTS
from translator.core.headless import HeadlessReader
from translator.core.jsonl import BadLine
from translator.model import RECORDED, Event

if TYPE_CHECKING:
    from translator.core.translator import Translator

NEWLINE = 0x0A
TEXT = re.compile(rb"[^\n]")  # where a run of blank lines ends
STAMPED = b'"timestamp":'  # an ISO stamp: read (and its range checked) line by line
HEADLESS = b'{"type":"'  # then a lower-case letter: a headless frame as the agent writes it
# msgspec raises RecursionError, not a DecodeError, past ~1000 levels (orjson stops at 1024).
TOO_DEEP = "invalid JSON (nested too deeply)"

# What a field must hold, for the diagnostic.
_COUNTS = f"whole numbers 0 to {M.U32_MAX}"
COUNTED = ("turn_index", "content_block_index", "turn_count", "turns_without_edit")  # said when out of range
HINTS = {
    "usage": f" (input_tokens and output_tokens, {_COUNTS})",
    "total_usage": f" (input_tokens and output_tokens, {_COUNTS})",
    "ttft": f" (null or secs and nanos, {_COUNTS})",
    "tbt": f" (null or secs and nanos, {_COUNTS})",
    "stopped_for": f" (a variant name, or one variant with its value; numbers {_COUNTS})",
}


def reason(etype: str, error: str, hints: dict[str, str] = HINTS) -> str:
    """A validation error of an event of `etype`, said the way every diagnostic says it."""
    message, _, where = error.partition(" - at `$")
    key = where.rstrip("`").lstrip(".").split(".")[0].split("[")[0]
    if not key and message.startswith(("Object missing required field `", "Object contains unknown field `")):
        field = message.split("`")[1]
        return f"{etype} without {field!r}" if "missing" in message else f"{etype} has an unknown field {field!r}"
    if key == "ts" and ("<=" in message or ">=" in message):
        return "'ts' is out of range (Unix seconds, 1970 to 9999)"
    if not key and message.startswith("'"):  # a check of the class's own (__post_init__)
        key = message.split("'")[1]
    hint = hints.get(key, "")
    if key in COUNTED and ("<=" in message or ">=" in message):
        hint = f" (a whole number 0 to {M.U32_MAX})"
    return f"{etype} has a malformed {key or 'value'!r}{hint}"


def utf8(data: bytes | memoryview) -> bool:
    """Whether bytes are valid UTF-8 (a value decoded as `Raw`, or a field serde does not
    write, is checked as JSON without its strings being decoded)."""
    if isinstance(data, bytes) and data.isascii():
        return True
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


class RawReader:
    """A stream's lines, decoded and checked, into the fold (see the module)."""

    def __init__(self, fold: Translator, headless: HeadlessReader) -> None:
        self.fold = fold
        self.headless = headless
        self._strict = fold.options.strict
        self._seen_first = False
        # False after a chunk held lines the batch cannot take (a headless stream): the next
        # chunk goes line by line at once, until one holds nothing but raw events again.
        self._batch = True
        self._all_raw = True

    def block(self, data: bytes, pos: int, end: int, now: float) -> None:
        """Complete lines `data[pos:end]` (each ends with a newline), `end` just past the
        chunk's last newline. Blank lines are counted, nothing more (a run of them is one
        search in C); the stretches between them go to the hot path, each a batch."""
        fold = self.fold
        while pos < end and not fold.stopped:
            if data[pos] == NEWLINE:  # blank lines
                text = TEXT.search(data, pos, end)
                stop = end if text is None else text.start()
                fold.line_no += stop - pos
            else:
                blank = data.find(b"\n\n", pos, end)
                stop = end if blank < 0 else blank + 1
                self._stretch(data, pos, stop, now, stop == end)
            pos = stop

    def _stretch(self, data: bytes, pos: int, end: int, now: float, last: bool) -> None:
        """The hot path: lines `data[pos:end]`, none of them blank (`last`: the chunk's last
        newline ends them)."""
        fold = self.fold
        if (
            self._batch
            and end - pos <= fold.options.max_line_bytes
            and not (self._may_read_stamps() and data.find(STAMPED, pos, end) >= 0)
            and (data.isascii() or utf8(memoryview(data)[pos:end]))  # (the whole chunk: a C scan)
        ):
            # Each line decoded on its own (in C, one call per line): a batch takes exactly
            # what the lines one by one would. (`decode_lines` would take two events on one
            # line, and a blank line elsewhere in the chunk would hide them from a count.)
            # (the last stretch, most often the whole chunk, split without a copy of it first)
            lines = (data.split(b"\n")[data.count(b"\n", 0, pos) : -1] if last
                     else data[pos:end].split(b"\n")[:-1])
            try:
                if self._strict:
                    list(map(M.STRICT.decode, lines))
                evs = list(map(M.DECODER.decode, lines))
            except (*M.Errors, RecursionError):  # a bad or blank line among them: said line by line
                evs = None
            if evs is not None:
                if not self._seen_first:
                    self._first_event(evs[0])
                first_no = fold.line_no + 1
                fold.line_no += len(lines)
                fold.events(evs, first_no, now, lines.__getitem__)
                return
        self._all_raw = True
        start = pos
        while start < end and not fold.stopped:
            nl = data.index(b"\n", start, end)
            fold._line(data[start:nl], now)
            start = nl + 1
        self._batch = self._all_raw

    def content(self, line: bytes, now: float) -> None:
        """One event's bytes (a line, or an event out of an envelope line)."""
        if line[9:10].islower() and line.startswith(HEADLESS):  # no raw event: not tried as one
            self._untyped(line, now, None)
            return
        try:
            if self._strict:
                M.STRICT.decode(line)
            ev = M.DECODER.decode(line)
        except msgspec.ValidationError as exc:
            self._untyped(line, now, str(exc))
            return
        except msgspec.DecodeError:
            self._untyped(line, now, None)
            return
        except RecursionError:
            self.fold._bad(line, TOO_DEEP)
            return
        if self._usable(ev, line):
            self.fold.event(ev, now)

    def _usable(self, ev: Event, line: bytes) -> bool:
        """The checks a decoded event (of either dialect) still needs: its bytes are UTF-8
        (a `Raw` value, or a field nobody reads, is checked as JSON only) and an ISO stamp that
        is read is in range; false when its line was reported."""
        fold = self.fold
        if not utf8(line):
            fold._bad(line, "invalid UTF-8")
            return False
        if ev.timestamp is not None and self._may_read_stamps():  # only then is it read
            try:
                E.stamp_s(ev.ts, ev.timestamp)
            except BadLine as exc:  # (a first event so rejected decides no clock: the next one does)
                fold._bad(line, exc.reason)
                return False
        if not self._seen_first:
            self._first_event(ev)
        return True

    def _untyped(self, line: bytes, now: float, error: str | None) -> None:
        """A line that is not one of the raw events: which of the rest it is."""
        fold = self.fold
        if not line.strip():
            return
        frame_error = None
        try:
            if self._strict:
                M.HEADLESS_STRICT.decode(line)
            frame = M.HEADLESS_DECODER.decode(line)
        except msgspec.ValidationError as exc:
            frame_error = str(exc)
        except msgspec.DecodeError:
            pass
        except RecursionError:
            fold._bad(line, TOO_DEEP)
            return
        else:  # a headless frame
            self._all_raw = False
            if type(frame) is M.ResultFrame:  # the repair reads it whole (a Raw field, an unknown one)
                try:
                    whole = E.loads(line)
                except BadLine as exc:
                    fold._bad(line, exc.reason)
                    return
                if self._usable(frame, line):
                    self.headless.result(frame, now, line, whole)
            elif self._usable(frame, line):
                self.headless.handlers[type(frame)](frame, now, line)
            return
        try:
            value = E.loads(line)
        except BadLine as exc:
            fold._bad(line, exc.reason)
            return
        etype = value.get("type") if type(value) is dict else None
        if type(etype) is str:
            if etype in M.TYPES:  # a raw event that did not decode: the decoder said why
                fold._bad(line, reason(etype, error or "invalid JSON"))
                return
            self._all_raw = False
            if etype in M.HEADLESS_TYPES:  # a headless frame that did not decode: its decoder said why
                fold._bad(line, reason(etype, frame_error or "invalid JSON", FRAME_HINTS))
                return
            fold.encoder.passthrough(line.strip())
            return
        try:
            inner = E.unwrap(value)
        except BadLine as exc:
            fold._bad(line, exc.reason)
            return
        if inner is None:
            fold._bad(line, E.not_an_event(value))
            return
        self._all_raw = False
        for item in inner:
            self.content(orjson.dumps(item), now)
            if fold.stopped:
                break

    def _may_read_stamps(self) -> bool:
        """Whether stamps are (or, the clock not decided yet, may be) read."""
        fold = self.fold
        return fold.clock == RECORDED or (not self._seen_first and fold.options.detect_recorded)

    def _first_event(self, ev: Event) -> None:
        """The stream's first event decides the clock under `--clock auto`."""
        fold = self.fold
        self._seen_first = True
        if not fold.options.detect_recorded:
            return
        stamp = E.timestamp_s(ev.ts, ev.timestamp)
        if stamp is not None:
            fold._use_recorded_clock()
