"""Lines of input → typed events: every line decoded and checked in C.

The hot path decodes a chunk's complete lines as one batch, each line on its own but all in
C (`map` of the decoder over the lines, so a batch takes exactly what the lines one by one
would), into the model's classes (model.py), and returns the list (the facade hands each run
of deltas in it, the bulk of a stream, to the fold whole). When the batch does not decode — a
bad line, a headless frame, an envelope, an event of a type this build does not know — the
same lines are read one at a time, each into what it is (reading.py): an event, a headless
frame, a `BadLine` with its reason, or a line to pass through; an envelope's events each so.
The reader makes no move and says nothing itself: it returns values (after h11's readers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from translator import model as M
from translator.core import headless_result as H
from translator.core import jsonl as E
from translator.core.fold import Options
from translator.core.headless import HINTS as FRAME_HINTS
from translator.core.jsonl import BadLine
from translator.core.reading import Foreign, Headless, Item, Passthrough
from translator.model import RECORDED, Event

STAMPED = b'"timestamp":'  # an ISO stamp: read (and its range checked) line by line
HEADLESS = b'{"type":"'  # then a lower-case letter: a headless frame as the agent writes it
CLAUDE_CODE_KEY = "claude_code_version"  # in Claude Code's init (and this command's claude-code format's), never the agent's
CLAUDE_CODE = b'"claude_code_version":'
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


def held(value: dict[str, Any], error: str | None) -> str:
    """What the field a validation error names holds, when it is a number or a short string
    (`: 4294967296`); nothing for a missing field or a bigger value."""
    key = (error or "").partition(" - at `$.")[2].rstrip("`").split(".")[0].split("[")[0]
    found = value.get(key)
    if isinstance(found, bool) or not isinstance(found, (int, float, str)) or key == "":
        return ""
    text = orjson.dumps(found).decode()
    return f", not {text}" if len(text) <= 40 else ""


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
    """A stream's lines, decoded and checked, into values (see the module). `recorded` is
    called once if `--clock auto` finds the stream's first event stamped."""

    def __init__(self, options: Options, recorded: Callable[[], None]) -> None:
        self._options = options
        self._strict = options.strict
        self._on_recorded = recorded
        self._recorded = options.clock == RECORDED  # whether stamps are read
        self._seen_first = False
        # False after a chunk held lines the batch cannot take (a headless stream): the next
        # chunk goes line by line at once, until one holds nothing but raw events again.
        self._batch = True
        self._all_raw = True
        self._lined = False  # the last chunk was read line by line
        # Claude Code's own output given as input (its init says claude_code_version): its lines
        # are skipped until the agent's own events come again; said once a stream.
        self._foreign = self._foreign_said = False

    def chunk(self, data: bytes, pos: int, end: int, last: bool) -> tuple[list[M.TurnEvent], list[bytes]] | None:
        """The hot path: complete lines `data[pos:end]`, none of them blank (each ends with a
        newline; `last`: the chunk's last newline ends them), as one batch of raw events with
        their lines; None when the batch does not decode (then each line is `read` on its own)."""
        if self._lined:  # what the lines read one by one were
            self._batch, self._lined = self._all_raw, False
        if (
            self._batch
            and end - pos <= self._options.max_line_bytes
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
                self._foreign = False
                if not self._seen_first:
                    self._first_event(evs[0])
                return evs, lines
        self._all_raw, self._lined = True, True
        return None

    def read(self, line: bytes) -> list[Item]:
        """One event's bytes (a line, or an event out of an envelope line): what it is."""
        if line[9:10].islower() and line.startswith(HEADLESS):  # no raw event: not tried as one
            return self._untyped(line, None)
        try:
            if self._strict:
                M.STRICT.decode(line)
            ev = M.DECODER.decode(line)
        except msgspec.ValidationError as exc:
            return self._untyped(line, str(exc))
        except msgspec.DecodeError:
            return self._untyped(line, None)
        except RecursionError:
            return [BadLine(TOO_DEEP, line)]
        self._foreign = False  # the agent's own events again
        bad = self._unusable(ev, line)
        if bad is None:
            return [ev]
        bad.ends_run = "RunEnd" if type(ev) is M.RunEnd else ""
        return [bad]

    def _unusable(self, ev: Event, line: bytes) -> BadLine | None:
        """The checks a decoded event (of either dialect) still needs: its bytes are UTF-8
        (a `Raw` value, or a field nobody reads, is checked as JSON only) and an ISO stamp that
        is read is in range; what is wrong with its line, if anything is."""
        if not utf8(line):
            return BadLine("invalid UTF-8", line)
        if ev.timestamp is not None and self._may_read_stamps():  # only then is it read
            try:
                E.stamp_s(ev.ts, ev.timestamp)
            except BadLine as exc:  # (a first event so rejected decides no clock: the next one does)
                return BadLine(exc.reason, line)
        if not self._seen_first:
            self._first_event(ev)
        return None

    def _untyped(self, line: bytes, error: str | None) -> list[Item]:
        """A line that is not one of the raw events: which of the rest it is."""
        if not line.strip():
            return []
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
            return [BadLine(TOO_DEEP, line)]
        else:  # a headless frame
            self._all_raw = False
            if type(frame) is M.SystemFrame and frame.subtype == "init":
                self._foreign = CLAUDE_CODE in line and CLAUDE_CODE_KEY in E.loads(line)
                if self._foreign:
                    first, self._foreign_said = not self._foreign_said, True
                    return [Foreign(line, first)]
            if self._foreign:
                return [Foreign(line, False)]
            whole = None
            last = H.RESULT if type(frame) is M.ResultFrame else ""  # a rejected one still ends its run
            if last:  # the repair reads it whole (a Raw field, an unknown one)
                try:
                    whole = E.loads(line)
                except BadLine as exc:
                    return [BadLine(exc.reason, line, last)]
            bad = self._unusable(frame, line)
            if bad is None:
                return [Headless(frame, line, whole)]
            bad.ends_run = last
            return [bad]
        try:
            value = E.loads(line)
        except BadLine as exc:  # a run's last event, known by how it begins, still ends its run
            ends = "" if exc.reason == E.CUT else E.last_event(line)  # (cut short: its writer's end)
            return [BadLine(exc.reason, line, ends)]
        etype = value.get("type") if type(value) is dict else None
        if type(etype) is str:
            if etype == "RunEnd":  # it still ends its run: the run's error result names the bad value
                return [BadLine(reason(etype, error or "invalid JSON") + held(value, error), line, etype)]
            if etype in M.TYPES:  # a raw event that did not decode: the decoder said why
                return [BadLine(reason(etype, error or "invalid JSON"), line)]
            self._all_raw = False
            if self._foreign:  # Claude Code's own frames (assistant, stream_event, …): skipped with it
                return [Foreign(line, False)]
            if etype == H.RESULT:  # a run's last frame, as a RunEnd: its run's error result names the bad value
                said = reason(etype, frame_error or "invalid JSON", FRAME_HINTS) + held(value, frame_error)
                return [BadLine(said, line, etype)]
            if etype in M.HEADLESS_TYPES:  # a headless frame that did not decode: its decoder said why
                return [BadLine(reason(etype, frame_error or "invalid JSON", FRAME_HINTS), line)]
            return [Passthrough(line.strip())]
        try:
            inner = E.unwrap(value)
        except BadLine as exc:
            return [BadLine(exc.reason, line)]
        if inner is None:
            return [BadLine(E.not_an_event(value), line)]
        self._all_raw = False
        items: list[Item] = []
        for event in inner:  # (a bad envelope among them is one bad event)
            items += [event] if isinstance(event, BadLine) else self.read(orjson.dumps(event))
        return items

    def _may_read_stamps(self) -> bool:
        """Whether stamps are (or, the clock not decided yet, may be) read."""
        return self._recorded or (not self._seen_first and self._options.detect_recorded)

    def _first_event(self, ev: Event) -> None:
        """The stream's first event decides the clock under `--clock auto`."""
        self._seen_first = True
        if not self._options.detect_recorded:
            return
        stamp = E.timestamp_s(ev.ts, ev.timestamp)
        if stamp is not None:
            self._recorded = True
            self._on_recorded()
