"""Lines of input → the fold's events: the only place that knows how serde lays out the bytes.

Every line is decoded and checked before the fold sees it, the cheapest way that is still
total: a run of text/thinking deltas — the bulk of a stream — is recognised by its bytes,
checked in one C call (model.delta_count) and handed to the fold as one `DeltaRun`, decoded
only if an output reads it; a known event is decoded straight into its handler (a megabyte
history checked as JSON without being built); anything else is decoded whole, where the
dialect (raw event, headless frame, envelope) is told apart per line.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from translator import events as E
from translator import model as M
from translator.encoders import DECODED, SKIP
from translator.events import BadLine, Event
from translator.model import RECORDED, DeltaRun

if TYPE_CHECKING:
    from translator.fold import Translator

DELTA_TYPES = (E.TEXT_DELTA, E.THINKING_DELTA)
DELTA_PREFIXES = (b'{"type":"AssistantTextDelta",', b'{"type":"AssistantThinkingDelta",')
# Where one delta line ends and the next begins.
JOINT_TEXT = b"}\n" + DELTA_PREFIXES[0]
JOINT_THINKING = b"}\n" + DELTA_PREFIXES[1]
Report = Callable[[bytes, str, int], None]

# serde writes `type` first, so a compact line of a known event starts with this prefix.
TYPE_PREFIX = b'{"type":"'


# Values a split parse skips because the output never shows them: RunEnd's history (megabytes
# in a long session) and TurnEnd's tool results (a copy of what ToolCallEnd carried). The key
# after the skipped one is found from the right, since only serde's fixed trailing keys follow
# it; the skipped key itself is the first occurrence before that (nothing before it in RunEnd;
# in TurnEnd the assistant message could hold the marker inside a tool input, so it is looked
# for from the right as well, within the fixed-shape tool results).
# Each entry: (skipped key, the key after it, the line length from which skipping pays).
SKIPPABLE: dict[str, tuple[bytes, bytes, int]] = {
    E.RUN_END: (b',"final_messages":', b',"total_usage":', 0),
    E.TURN_END: (b',"tool_results":', b',"stop_reason":', 16384),
}


def skipped_name(etype: str) -> str:
    """How an encoder's `needs` names the value a split parse of `etype` skips."""
    return f"{etype}.{SKIPPABLE[etype][0][2:-2].decode()}"


def split_parse(line: bytes, etype: str, checked: bool = True) -> Event | None:
    """Decode a compact serde line of `etype` without its skippable value (see SKIPPABLE).

    A JSON string cannot contain an unescaped `,"key":` marker, so the markers found are the
    real keys. The head and the tail are parsed and checked; the skipped value is only checked
    to be valid JSON, without being built (not even that unless `checked`). Returns None where
    the line is not laid out as serde writes it, or the skipped value is not valid JSON (the
    caller then parses it whole, and reports it).
    """
    cut, resume, _ = SKIPPABLE[etype]
    j = line.rfind(resume)
    if j < 0:
        return None
    i = line.find(cut, 0, j) if etype == E.RUN_END else line.rfind(cut, 0, j)
    if i < 0:
        return None
    try:
        head = orjson.loads(line[:i] + b"}")
        tail = orjson.loads(b"{" + line[j + 1 :])
    except orjson.JSONDecodeError:
        return None
    if type(head) is not dict or head.get("type") != etype or type(tail) is not dict:
        return None
    if checked and not M.valid_json(line[i + len(cut) : j]):
        return None
    head.update(tail)
    return E.check(head, etype, skipped=cut[2:-2].decode())




def decode_deltas(region: bytes, first_no: int, bad: Report) -> list[Event]:
    """Text/thinking delta lines (newline-separated, numbered from `first_no`) whose decoding
    was deferred: one orjson call when they are all good; otherwise one by one, the bad ones
    reported (`bad(line, reason, line_no)`) and left out."""
    if b"\n" in region:  # (one line, maybe a long one, is decoded as it is, not copied twice)
        try:
            evs: list[dict[str, Any]] = orjson.loads(b"[" + region.replace(b"\n", b",") + b"]")
            if E.all_fit(evs, DELTA_TYPES) and b'"ts":' not in region and b'"timestamp":' not in region:
                return evs
        except orjson.JSONDecodeError:
            pass
    good = []
    for line_no, line in enumerate(region.split(b"\n"), first_no):
        try:
            ev = E.parse(line)
            if ev["type"] not in DELTA_TYPES:
                raise BadLine(f"expected {' or '.join(DELTA_TYPES)}")
            good.append(ev)
        except BadLine as exc:
            bad(line, exc.reason, line_no)
    return good


def text_run(region: bytes) -> tuple[int, list[str]] | None:
    """The block index and texts of newline-separated text deltas that all belong to one block,
    laid out exactly as serde writes them; None for anything else (decode those whole).

    The first line's fields before `text` are decoded and checked; every other line must start
    with the same bytes (a JSON string cannot hold a raw newline, so `}\n` only ends a line);
    the texts are then decoded as one array of strings, which checks each of them."""
    first = region[: region.find(b"\n")] if b"\n" in region else region
    marker = first.find(b',"text":')
    if marker < 0 or not region.endswith(b"}"):
        return None
    prefix = first[: marker + 8]
    try:
        head = orjson.loads(first[:marker] + b"}")
        texts = orjson.loads(b"[" + region[len(prefix) : -1].replace(b"}\n" + prefix, b",") + b"]")
    except orjson.JSONDecodeError:
        return None
    if (
        type(head) is not dict
        or head.get("type") != E.TEXT_DELTA
        or len(head) != 3
        or type(head.get("turn_index")) is not int
        or type(head.get("content_block_index")) is not int
        or not 0 <= head["turn_index"] <= E.U32_MAX
        or not 0 <= head["content_block_index"] <= E.U32_MAX
        or len(texts) != region.count(b"\n") + 1
        or not set(map(type, texts)) <= {str}
    ):
        return None
    return head["content_block_index"], texts


THINKING_MARK = b'"type":"AssistantThinkingDelta"'


class RawReader:
    """A stream's lines, decoded and checked, into the fold's handlers (see the module)."""

    def __init__(self, fold: Translator, handlers: dict[str, Callable[[Event, float, bytes], None]]) -> None:
        self.fold = fold
        self.handlers = handlers
        opts = fold.options
        self._bad: Report = fold._bad
        self._delta_mode = fold.encoder.delta_mode
        # Handlers that take the raw line and decode only what they need. Empty until the first
        # event was decoded in full (it decides the clock), and always empty under --strict.
        self._fast: dict[bytes, Callable[[bytes, float], None]] = {}
        self._batch_deltas = False
        self._seen_first = False
        fast: dict[bytes, Callable[[bytes, float], None]] = {}
        routed = [E.TURN_START, E.TOOL_START, E.TOOL_INPUT, E.TOOL_END, E.TURN_END, E.RUN_END]
        if self._delta_mode != DECODED:
            fast[E.TEXT_DELTA.encode()] = self._fast_delta
            fast[E.THINKING_DELTA.encode()] = self._fast_delta
        for etype in routed:
            fast[etype.encode()] = self._route(etype)
        # --on-invalid fail promises that every bad line stops the run, so it decodes them all.
        self._fast_table = {} if opts.strict or opts.stop_on_invalid else fast

    def block(self, data: bytes, pos: int, end: int, now: float) -> None:
        """The hot path: complete lines `data[pos:end]` (each ends with a newline).

        Text/thinking deltas are the bulk of a stream. A run of them is recognised and counted
        with C-level `find`/`count` over the bytes, checked in one C call, and never touched one
        by one in Python; every other line goes through the fold's `_line`.

        A run ends at the next line starting `{"type":"T` (TurnStart/TurnEnd/ToolCall*). The
        counts then prove that every line in it is a delta that ends with `}` and holds a single
        value (so no line is a cut-off delta with another event glued on): checked, as many
        deltas decode as there are lines (a `}`, a newline and a `{` can only part two top-level
        values: neither a string nor a container can hold them so); trusted, as many
        `{"type":"` as lines. Where they do not, or a line fails its check, the lines are
        taken one at a time.
        """
        fold = self.fold
        opts = fold.options
        next_t = -1  # cached start of the next `\n{"type":"T` in data
        while pos < end:
            if not (self._batch_deltas and data.startswith(DELTA_PREFIXES, pos)):
                nl = data.find(b"\n", pos, end)
                line = data[pos:nl]
                # (the handler is looked up here, as `content` would: one call less per line)
                fold._line(line, now, self._fast.get(line[9 : line.find(b'"', 9)]) if line.startswith(TYPE_PREFIX) else None)
                if fold.stopped:
                    return
                pos = nl + 1
                continue
            if next_t < pos:
                next_t = data.find(b'\n{"type":"T', pos, end)
                if next_t < 0:
                    next_t = end - 1
            stop = next_t + 1  # just past the run: the first line that is not a delta
            lines = data.count(b"\n", pos, stop)
            joints = data.count(JOINT_TEXT, pos, stop)
            if joints + 1 < lines:
                joints += data.count(JOINT_THINKING, pos, stop)
            if (
                joints + 1 == lines
                and data[stop - 2] == 0x7D  # `}`
                and stop - pos <= opts.max_line_bytes
                and (
                    data.count(b'{"type":"', pos, stop) if opts.trust_input else M.delta_count(data, pos, stop - 1)
                ) == lines
            ):
                first_no = fold.line_no + 1
                fold.line_no += lines
                keep = self._delta_mode != SKIP or fold.collecting
                region = data[pos : stop - 1] if keep else b""
                last = data[data.rfind(b"\n", pos, stop - 1) + 1 : stop - 1]
                try:
                    fold._deltas(self.delta_run(lines, first_no, last, region), now)
                except Exception as exc:
                    fold._fault(exc, None, now)
            else:  # something else is among them: take these lines one at a time
                for line in data[pos : stop - 1].split(b"\n"):
                    fold._line(line, now)
                    if fold.stopped:
                        return
            pos = stop

    def delta_run(self, count: int, first_no: int, last: bytes, lines: bytes) -> DeltaRun:
        return DeltaRun(
            count, first_no, last, lines, THINKING_MARK in lines,
            partial(decode_deltas, lines, first_no, self._bad), partial(text_run, lines),
        )

    def content(self, line: bytes, now: float) -> None:
        """One event's bytes (a line, or an event out of an envelope line)."""
        if line.startswith(TYPE_PREFIX):
            handler = self._fast.get(line[9 : line.find(b'"', 9)])
            if handler is not None:
                handler(line, now)
                return
        elif not line.strip():
            return
        self._general(line, now)

    def _general(self, line: bytes, now: float) -> None:
        """Full decode and check, then the event's handler (or pass-through if unknown)."""
        try:
            ev = E.parse(line)
        except BadLine as exc:
            if not self._envelope(line, now):
                self.fold._bad(line, exc.reason)
            return
        if not self._seen_first:
            self._first_event(ev)
        handler = self.handlers.get(ev["type"])
        if handler is None:
            self.fold.encoder.passthrough(line.strip())
        else:
            handler(ev, now, line)

    def _envelope(self, line: bytes, now: float) -> bool:
        """Whether the line is an envelope (or a batch) of events; if so, each is handled as if
        it were a line of its own (same line number)."""
        try:
            inner = E.unwrap(E.loads(line))
        except BadLine as exc:
            self.fold._bad(line, exc.reason)
            return True
        if inner is None:
            return False
        for ev in inner:
            self.content(orjson.dumps(ev), now)
            if self.fold.stopped:
                break
        return True

    def _first_event(self, ev: Event) -> None:
        fold = self.fold
        self._seen_first = True
        if fold.options.detect_recorded and E.has_timestamp(ev):
            fold._clock.kind = RECORDED
        self._fast = self._fast_table
        if fold.clock == RECORDED:  # every stamp is read, so every delta is decoded and checked
            self._fast = {k: v for k, v in self._fast.items() if k.decode() not in DELTA_TYPES}
        self._batch_deltas = bool(self._fast) and fold.clock != RECORDED

    def _framed(self, line: bytes) -> bool:
        """The check a line gets before anything else on the fast path: it must end like a
        JSON object (a line cut short by a dying writer does not)."""
        if line.rstrip().endswith(b"}"):
            return True
        self.fold._bad(line, "invalid JSON (truncated line)")
        return False

    def _fast_delta(self, line: bytes, now: float) -> None:
        if not self._framed(line):
            return
        if self.fold.options.trust_input or M.delta_count(line) == 1:
            self.fold._deltas(self.delta_run(1, self.fold.line_no, line, line), now)
        else:  # decoded whole: reported with its reason, or (a shape M does not vouch for) taken
            self._general(line, now)

    def _route(self, etype: str) -> Callable[[bytes, float], None]:
        """A line of a known type, decoded (without its skippable value) straight into its
        handler; anything unexpected takes the general path, which reports it."""
        handler = self.handlers[etype]
        fold = self.fold
        # Below this size skipping a value costs more (copies, a second decode) than it saves.
        # A value the encoder reads is never skipped.
        skippable = SKIPPABLE.get(etype)
        split_from = skippable[2] if skippable is not None and skipped_name(etype) not in fold.encoder.needs else None
        checked = not fold.options.trust_input

        def route(line: bytes, now: float) -> None:
            try:
                ev = split_parse(line, etype, checked) if split_from is not None and len(line) >= split_from else None
                if ev is None:
                    ev = orjson.loads(line)
                    if type(ev) is not dict or ev.get("type") != etype:
                        raise BadLine("")
                    E.check(ev, etype)
            except (BadLine, orjson.JSONDecodeError):
                self._general(line, now)
                return
            handler(ev, now, line)

        return route
