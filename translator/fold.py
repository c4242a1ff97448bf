"""The sans-I/O core: bytes of one input stream in, output frames and diagnostics out.

`Translator` owns line framing, per-line error handling, the per-frame state machine and timing.
It never reads, writes or looks at a clock: the caller passes each chunk with the time it
arrived (`now`, monotonic seconds) and collects what came out with `take_output()` and
`take_diagnostics()`. One input frame is one agent run, closed by its `RunEnd`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from translator import events as E
from translator import headless as H
from translator import model as M
from translator.diagnostics import Diagnostic
from translator.encoders import DECODED, RAW, SILENT, SKIP, Encoder, RunSummary
from translator.events import BadLine, Event
from translator.headless_reader import HeadlessReader
from translator.lines import EXCERPT_BYTES, LineBuffer
from translator.rates import RateCard, turn_cost
from translator.states import Move, RunState, State
from translator.stops import LOST_RUN_END as LOST_RUN_END  # re-exported: callers read them here
from translator.stops import THINKING_BUDGET as THINKING_BUDGET
from translator.stops import TRUNCATED as TRUNCATED
from translator.stops import classify

WALL, RECORDED, ESTIMATED = "wall", "recorded", "estimated"
DELTA_TYPES = (E.TEXT_DELTA, E.THINKING_DELTA)
DELTA_PREFIXES = (b'{"type":"AssistantTextDelta",', b'{"type":"AssistantThinkingDelta",')
# Where one delta line ends and the next begins.
JOINT_TEXT = b"}\n" + DELTA_PREFIXES[0]
JOINT_THINKING = b"}\n" + DELTA_PREFIXES[1]


@dataclass(slots=True)
class Options:
    """What the core needs to know; the CLI fills it."""

    clock: str = WALL  # wall | recorded | estimated
    detect_recorded: bool = False  # --clock auto: use `recorded` if the first event is stamped
    strict: bool = False  # no fast paths: every line decoded whole (the reference for the checks)
    trust_input: bool = False  # delta lines and skipped values only framing-checked (faster)
    stop_on_invalid: bool = False  # --on-invalid fail
    max_line_bytes: int = 64 << 20
    epoch: float = 0.0  # wall-clock seconds at monotonic 0, for the timestamps frames carry


MAX_MS = 1 << 53  # the largest integer every JSON reader takes exactly


def to_ms(seconds: float) -> int:
    """Whole milliseconds, never negative and never more than a JSON number holds exactly."""
    ms = seconds * 1000
    return round(min(ms, MAX_MS)) if ms > 0 else 0


class Frame:
    """State of one open input frame (one run). Nothing in it outlives the frame."""

    __slots__ = (
        "answer",
        "api_s",
        "attempts",
        "cost",
        "fallback",
        "fallback_mark",
        "first_model_now",
        "first_ttft",
        "last_model_now",
        "last_model_src",
        "last_now",
        "last_text",
        "message_ids",
        "open_index",
        "saw_turn",
        "stop_reason",
        "t_prev_end",
        "t_start",
        "tool_calls",
        "tools",
        "turn_deltas",
        "turn_model",
        "turns",
        "usage",
    )  # fmt: skip

    def __init__(self, t_start: float | None) -> None:
        self.t_start = t_start  # clock time the frame began (None for the estimated clock)
        self.t_prev_end = t_start  # end of the previous turn, where the next API span begins
        self.api_s = 0.0
        self.turns = 0
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
        self.cost = 0.0
        self.tool_calls = 0
        self.answer: str | None = None
        # Blocks of raw delta lines (first line number, lines), kept only while no turn has
        # produced a reply: they are the fallback reply.
        self.fallback: list[tuple[int, bytes]] | None = []
        self.fallback_mark = 0  # where the open turn's attempt began in `fallback`
        self.saw_turn = False
        self.open_index: int | None = None  # turn_index of the TurnStart awaiting its TurnEnd
        self.attempts = 0  # retries of the open turn so far
        self.turn_model: str | None = None
        self.turn_deltas = 0
        self.last_model_now = 0.0  # arrival of the turn's latest model-streamed event
        self.last_model_src: bytes | Event | None = None  # that event, for its recorded time
        self.tools: dict[str, tuple[str | None, list[str]]] = {}
        self.last_now = 0.0
        self.first_model_now: float | None = None  # arrival of the run's first model event
        self.first_ttft: float | None = None  # the first turn's reported ttft (seconds)
        self.stop_reason: str | None = None  # the last turn's
        self.message_ids: list[str] = []
        self.last_text: str | None = None  # the last non-empty text block of any turn


class Translator:
    """One input stream's translation. Feed bytes; collect frames; `end()` or `cancel()` once."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        rates: RateCard,
        options: Options | None = None,
        started_at: float = 0.0,
        source: str = "<stdin>",
    ) -> None:
        self.options = opts = options or Options()
        self.encoder = encoder
        self.rates = rates
        self.source = source
        self.clock = opts.clock
        self.line_no = 0
        self.bad_lines = 0
        self.frames_closed = 0
        self.frames_written = 0  # output frames taken so far
        self.last_subtype: str | None = None
        # Set to [] by a shell that wants each closed run with its last turn's model (metrics).
        self.closed: list[tuple[RunSummary, str | None]] | None = None
        self.stopped = False  # after --on-invalid fail, or end()/cancel()
        self.model: str | None = None
        self._started_at = started_at
        self._first_frame = True
        self._frame: Frame | None = None
        self._runs = RunState()  # no run / in run / in turn: moves only through states.TRANSITIONS
        self._out = encoder.out
        self._diags: list[str] = []
        self._rejects: list[bytes] = []
        self._lines = LineBuffer(opts.max_line_bytes, self._reject, self._skipped)
        self._last_ts: float | None = None
        self._estimated_s = 0.0  # estimated API time of the stream's closed frames
        self._warned: set[str] = set()
        self._orphan_of: Encoder | None = None  # the encoder, while a failed run's rest is skipped
        self._handlers: dict[str, Callable[[Event, float, bytes], None]] = {
            E.TURN_START: self._turn_start,
            E.TEXT_DELTA: self._text_delta,
            E.THINKING_DELTA: self._thinking_delta,
            E.TOOL_START: self._tool_start,
            E.TOOL_INPUT: self._tool_input,
            E.TOOL_END: self._tool_end,
            E.TURN_END: self._turn_end,
            E.RUN_END: self._run_end,
            **HeadlessReader(self).handlers,
        }
        # Handlers that take the raw line and decode only what they need. Empty until the first
        # event was decoded in full (it decides the clock), and always empty under --strict.
        self._fast: dict[bytes, Callable[[bytes, float], None]] = {}
        self._batch_deltas = False
        self._seen_first = False
        self._delta_mode = encoder.delta_mode
        fast: dict[bytes, Callable[[bytes, float], None]] = {}
        routed = [E.TURN_START, E.TOOL_START, E.TOOL_INPUT, E.TOOL_END, E.TURN_END, E.RUN_END]
        if encoder.delta_mode != DECODED:
            fast[E.TEXT_DELTA.encode()] = self._fast_delta
            fast[E.THINKING_DELTA.encode()] = self._fast_delta
        for etype in routed:
            fast[etype.encode()] = self._route(etype)
        # --on-invalid fail promises that every bad line stops the run, so it decodes them all.
        self._fast_table = {} if opts.strict or opts.stop_on_invalid else fast

    # ------------------------------------------------------------------ public API

    def feed(self, data: bytes, now: float) -> None:
        """Consume a chunk of input that arrived at `now`."""
        if self.stopped or not data:
            return
        try:
            self._feed(data, now)
        except Exception as exc:  # the last resort: see _fault
            self._fault(exc, None, now)

    def _feed(self, data: bytes, now: float) -> None:
        line, rest, pos = self._lines.head(data)
        if line is not None:
            self._line(line, now)
            del line  # not held while the rest of the chunk is read
        if rest is None:
            return
        last_nl = rest.rfind(b"\n")
        if last_nl >= pos and not self.stopped:
            self._block(rest, pos, last_nl + 1, now)
        tail = rest[max(last_nl + 1, pos) :]
        if tail and not self.stopped:
            self._lines.hold(tail)

    def drop_line(self, reason: str) -> None:
        """Skip the unfinished line held so far and the rest of it as it arrives (reported and
        rejected as `reason`): a service whose memory budget the line would exceed."""
        if not self.stopped:
            self._lines.skip(reason)

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unfinished line are held."""
        return self._lines.pending_bytes

    def _reject(self, piece: bytes) -> None:
        self._rejects.append(piece)

    def _skipped(self, reason: str, excerpt: bytes) -> None:
        """A line the buffer skipped has ended: it is reported as a line of its own."""
        self.line_no += 1
        self._report(reason, excerpt)

    def end(self, now: float) -> None:
        """The input ended: a last line without newline counts; an open frame is closed."""
        if self.stopped:
            return
        try:
            line = self._lines.finish()
            if line is not None:
                self._line(line, now)
            if not self.stopped:
                self._move(Move.INPUT_END, now)
        except Exception as exc:
            self._fault(exc, None, now)
        self.stopped = True

    def cancel(self, now: float) -> None:
        """A signal stopped us: the open frame ends as `cancelled`."""
        if not self.stopped:
            try:
                self._close(now, "cancelled", None)
            except Exception as exc:
                self._fault(exc, None, now)
            self.stopped = True

    def take_output(self) -> bytes:
        return b"".join(self.take_frames())

    def take_frames(self) -> list[bytes]:
        """The output as the frames it is, for a writer that need not join them (a long
        line's frame is then never copied)."""
        self.frames_written += len(self._out)  # an encoder writes one frame per item
        frames = self._out[:]
        self._out.clear()
        return frames

    def take_diagnostics(self) -> list[str]:
        diags = self._diags[:]
        self._diags.clear()
        return diags

    def take_rejects(self) -> bytes:
        return b"".join(self.take_reject_pieces())

    def take_reject_pieces(self) -> list[bytes]:
        """The rejected bytes as they were kept (an over-long line in the pieces it came in),
        for a writer that need not join them."""
        pieces = self._rejects
        self._rejects = []
        return pieces

    @property
    def frame_open(self) -> bool:
        return self._frame is not None

    # ------------------------------------------------------------------ lines

    def _block(self, data: bytes, pos: int, end: int, now: float) -> None:
        """The hot path: complete lines `data[pos:end]` (each ends with a newline).

        Text/thinking deltas whose content the output does not need are the bulk of a stream.
        A run of them is recognised and counted with C-level `find`/`count` over the bytes and
        never touched one by one in Python; every other line goes through `_line`.

        A run ends at the next line starting `{"type":"T` (TurnStart/TurnEnd/ToolCall*). The
        counts then prove that every line in it is a delta that ends with `}` and holds a single
        `{"type":"` (so no line is a cut-off delta with another event glued on); where they do
        not, the lines are taken one at a time.
        """
        next_t = -1  # cached start of the next `\n{"type":"T` in data
        while pos < end:
            if not (self._batch_deltas and data.startswith(DELTA_PREFIXES, pos)):
                nl = data.find(b"\n", pos, end)
                self._line(data[pos:nl], now)
                if self.stopped:
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
                and data.count(b'{"type":"', pos, stop) == lines
                and stop - pos <= self.options.max_line_bytes
                and (self.options.trust_input or M.valid_deltas(data, pos, stop - 1))
            ):
                first_no = self.line_no + 1
                self.line_no += lines
                keep = self._delta_mode != SKIP or self._collecting()
                region = data[pos : stop - 1] if keep else b""
                last = data[data.rfind(b"\n", pos, stop - 1) + 1 : stop - 1]
                try:
                    self._deltas(lines, last, region, now, first_no)
                except Exception as exc:
                    self._fault(exc, None, now)
            else:  # something else is among them: take these lines one at a time
                for line in data[pos : stop - 1].split(b"\n"):
                    self._line(line, now)
                    if self.stopped:
                        return
            pos = stop

    def _collecting(self) -> bool:
        """Whether delta lines must be kept: for the fallback reply, until a turn gives one."""
        fr = self._frame
        return fr is None or fr.fallback is not None

    def _line(self, line: bytes, now: float) -> None:
        self.line_no += 1
        try:
            self._take(line, now)
        except Exception as exc:
            self._fault(exc, line, now)

    def _take(self, line: bytes, now: float) -> None:
        if len(line) > self.options.max_line_bytes:
            self._rejects.append(line + b"\n")
            self._report(
                f"line longer than {self.options.max_line_bytes} bytes ({len(line)} bytes)", line
            )
            return
        self._content(line, now)

    def _content(self, line: bytes, now: float) -> None:
        """One event's bytes (a line, or an event out of an envelope line)."""
        if line.startswith(E.TYPE_PREFIX):
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
                self._bad(line, exc.reason)
            return
        if not self._seen_first:
            self._first_event(ev)
        handler = self._handlers.get(ev["type"])
        if handler is None:
            self.encoder.passthrough(line.strip())
        else:
            self._handle(handler, ev, now, line)

    def _envelope(self, line: bytes, now: float) -> bool:
        """Whether the line is an envelope (or a batch) of events; if so, each is handled as if
        it were a line of its own (same line number)."""
        try:
            inner = E.unwrap(E.loads(line))
        except BadLine as exc:
            self._bad(line, exc.reason)
            return True
        if inner is None:
            return False
        for ev in inner:
            self._content(orjson.dumps(ev), now)
            if self.stopped:
                break
        return True

    def _first_event(self, ev: Event) -> None:
        self._seen_first = True
        if self.options.detect_recorded and E.has_timestamp(ev):
            self.clock = RECORDED
        self._fast = self._fast_table
        if self.clock == RECORDED:  # every stamp is read, so every delta is decoded and checked
            self._fast = {k: v for k, v in self._fast.items() if k.decode() not in DELTA_TYPES}
        self._batch_deltas = bool(self._fast) and self.clock != RECORDED

    def _bad(self, line: bytes, reason: str, line_no: int | None = None) -> None:
        self._rejects.append(line + b"\n")
        self._report(reason, line, line_no)

    def _report(self, reason: str, line: bytes, line_no: int | None = None) -> None:
        self.bad_lines += 1
        excerpt = line[:EXCERPT_BYTES].decode("utf-8", "backslashreplace").rstrip("\r")
        where = self.line_no if line_no is None else line_no
        self._diags.append(Diagnostic(self.source, where, reason, excerpt))
        if self.options.stop_on_invalid and not self.stopped:
            self._abort(self._now_guess(), f"input rejected at line {self.line_no}: {reason}")
            self.stopped = True

    def _fault(self, exc: Exception, line: bytes | None, now: float) -> None:
        """The last resort for a failure nothing else foresaw: the line at fault (if one is) is
        reported and rejected, the open run ends with an error result (its state is in doubt)
        and the stream goes on with the next line."""
        if line is not None:
            self._rejects.append(line + b"\n")
        self._report(f"cannot be translated (internal error, {type(exc).__name__}: {exc})", line or b"")
        self._abort(now, f"internal error at line {self.line_no}: {type(exc).__name__}")
        if self._orphan_of is None and not (line is not None and ends_run(line)):
            # The rest of the failed run is read into nothing, so that it has one result.
            self._orphan_of, self.encoder = self.encoder, SILENT

    def _end_orphan(self) -> None:
        """The failed run is over (its end, or a new run's start): translate again."""
        if self._orphan_of is not None:
            self._drop_frame()
            self.encoder, self._orphan_of = self._orphan_of, None

    def _abort(self, now: float, error: str) -> None:
        """Close the open frame as an error, whatever happens: if not even its result can be
        written, the plainest one is."""
        if self._frame is None:
            return
        try:
            self._close(now, "error", error)
        except Exception:
            self._drop_frame()
            self.frames_closed += 1
            self.last_subtype = "error"
            self._out.append(plain_result(getattr(self.encoder, "session_id", None), error))

    # ------------------------------------------------------------------ frames and time

    def _stamp(self, now: float, src: bytes | Event | None) -> float:
        """Wall-clock seconds of an event, for the timestamps frames carry. With the estimated
        clock, never the arrival: the stream's start plus the API time estimated so far (it
        grows at each TurnEnd), so the same bytes give the same frames however they arrive."""
        if self.clock == RECORDED:
            return self._when(now, src)
        if self.clock == ESTIMATED:
            fr = self._frame
            return self.options.epoch + self._started_at + self._estimated_s + (fr.api_s if fr is not None else 0.0)
        return now + self.options.epoch

    def _when(self, now: float, src: bytes | Event | None) -> float:
        """The clock time of an event: its arrival (wall) or its own stamp (recorded)."""
        if self.clock != RECORDED:
            return now
        if isinstance(src, bytes):
            try:
                src = E.loads(src)
            except BadLine:
                src = None
        ts = E.timestamp_s(src) if isinstance(src, dict) else None
        if ts is None:
            return self._last_ts if self._last_ts is not None else 0.0
        self._last_ts = ts
        return ts

    def _open(self, now: float, src: bytes | Event) -> Frame:
        if self.clock == ESTIMATED:
            t_start = None
        elif self._first_frame and self.clock == WALL:
            t_start = self._started_at  # a live stream's first run began when we started reading
        else:
            t_start = self._when(now, src)
        self._first_frame = False
        self._frame = frame = Frame(t_start)
        self.encoder.frame_start(self.model, self._stamp(now, src))
        return frame

    def _close_turn_span(self, fr: Frame, now: float, end: Event | None) -> None:
        """Add the API time of the turn just ended (or cut off) to the frame."""
        if self.clock == ESTIMATED:
            if end is not None:
                ttft, tbt = E.duration_s(end["ttft"]), E.duration_s(end["tbt"])
                fr.api_s += ttft + tbt * max(fr.turn_deltas - 1, 0)
            return
        if self.in_turn and fr.t_prev_end is not None:
            fr.api_s += max(self._when(fr.last_model_now, fr.last_model_src) - fr.t_prev_end, 0.0)
        if end is not None:
            fr.t_prev_end = self._when(now, end)

    def _now_guess(self) -> float:
        return self._frame.last_now if self._frame is not None else self._started_at

    def _summary(
        self, fr: Frame, now: float, subtype: str, error: str | None, end: Event | None
    ) -> RunSummary:
        fr.last_model_src = None  # the run is ending: a long line this points to can go
        ttft: float | None = None
        if self.clock == ESTIMATED:
            duration = fr.api_s
            ttft = fr.first_ttft
        else:
            if fr.first_model_now is not None and fr.t_start is not None and self.clock == WALL:
                ttft = fr.first_model_now - fr.t_start
            t_end = self._when(now, end) if end is not None else (
                now if self.clock == WALL else (self._last_ts or 0.0)
            )
            duration = t_end - (fr.t_start or 0.0)
        return RunSummary(
            subtype=subtype,
            error=error,
            answer=fr.answer,
            fallback_text=self._fallback_text(fr.fallback) if fr.answer is None and fr.fallback else "",
            turns=fr.turns if end is None else end["turn_count"],
            usage=fr.usage,  # the sum of TurnEnd.usage, as the agent's driver reports it
            cost_usd=fr.cost,
            duration_ms=to_ms(duration),
            duration_api_ms=to_ms(fr.api_s),
            duration_source=self.clock,
            tool_calls=fr.tool_calls,
            turns_without_edit=None if end is None else end.get("turns_without_edit", 0),
            no_edit_nudge_emitted=None if end is None else end.get("no_edit_nudge_emitted", False),
            stopped_for=None if end is None else end["stopped_for"],
            stop_reason=fr.stop_reason,
            ttft_ms=None if ttft is None else to_ms(ttft),
            message_ids=fr.message_ids,
            last_text=fr.last_text,
            tools_running=bool(fr.tools),
        )

    def _fallback_text(self, kept: list[tuple[int, bytes]]) -> str:
        """The run's text deltas joined: decoded only now, when no turn gave a reply. The run
        is ending, so each block is let go once decoded: a long line is not held while the
        result that quotes it is written."""
        texts: list[str] = []
        kept.reverse()
        while kept:
            first_no, block = kept.pop()
            texts += [ev["text"] for ev in self._decode_region(block, first_no) if ev["type"] == E.TEXT_DELTA]
            del block
        return "".join(texts)

    def _finish(self, run: RunSummary, t: float) -> None:
        if self._orphan_of is not None:  # its result was written when it failed
            self._end_orphan()
            return
        self.encoder.result(run, t)
        if self._frame is not None and self.clock == ESTIMATED:
            self._estimated_s += self._frame.api_s
        if self.closed is not None:
            self.closed.append((run, (self._frame and self._frame.turn_model) or self.model))
        self._drop_frame()
        self.frames_closed += 1
        self.last_subtype = run.subtype

    def _drop_frame(self) -> None:
        """The open run is over (closed, or given up after a failure)."""
        self._frame = None
        self._move(Move.RUN_END, 0.0)  # no recovery: `now` is not read

    def _move(self, move: Move, now: float) -> None:
        """Make a move through the table (states.py); a recovery closes the open run first."""
        self._runs.move(move, lambda error: self._close(now, "error", error))

    @property
    def in_turn(self) -> bool:
        return self._runs.state is State.IN_TURN

    def _close(self, now: float, subtype: str, error: str | None) -> None:
        """End the open frame without its RunEnd (input cut, signal, rejected input)."""
        fr = self._frame
        if fr is None:
            return
        self._close_turn_span(fr, now, None)
        self._finish(self._summary(fr, now, subtype, error, None), self._stamp(now, None))

    # ------------------------------------------------------------------ events

    def _frame_for(self, now: float, src: bytes | Event) -> Frame:
        fr = self._frame or self._open(now, src)
        fr.last_now = now
        return fr

    def _model_event(self, fr: Frame, now: float, src: bytes | Event) -> None:
        if fr.first_model_now is None:
            fr.first_model_now = now
        self._move(Move.MODEL, now)
        fr.last_model_now = now
        fr.last_model_src = src

    def _framed(self, line: bytes) -> bool:
        """The check a line gets when its content is decoded later or never: it must end like
        a JSON object (a line cut short by a dying writer does not)."""
        if line.rstrip().endswith(b"}"):
            return True
        self._bad(line, "invalid JSON (truncated line)")
        return False

    def _fast_delta(self, line: bytes, now: float) -> None:
        if not self._framed(line):
            return
        if self.options.trust_input or M.valid_deltas(line):
            self._deltas(1, line, line, now, self.line_no)
        else:  # decoded whole: reported with its reason, or (a shape M does not vouch for) taken
            self._general(line, now)

    def _deltas(self, n: int, last: bytes, lines: bytes, now: float, first_no: int) -> None:
        """Account `n` text/thinking deltas (the last one is `last`) without decoding them.
        `lines` (newline-separated, numbered from `first_no`) are kept for the fallback reply
        while no turn has given one, and handed raw to an encoder that may want them."""
        fr = self._frame_for(now, last)
        self._model_event(fr, now, last)
        fr.turn_deltas += n
        if lines and fr.fallback is not None:
            fr.fallback.append((first_no, lines))
        if self._delta_mode == RAW:
            self.encoder.raw_deltas(
                lines, lambda: self._decode_region(lines, first_no), self._stamp(now, None)
            )
        elif self._delta_mode == DECODED:
            t = self._stamp(now, None)
            text, thinking = self.encoder.text_delta, self.encoder.thinking_delta
            for ev in self._decode_region(lines, first_no):
                (text if ev["type"] == E.TEXT_DELTA else thinking)(ev, t)

    def _decode_region(self, region: bytes, first_no: int) -> list[Event]:
        """Text/thinking delta lines (newline-separated, numbered from `first_no`) whose
        decoding was deferred: one orjson call when they are all good; otherwise one by one,
        the bad ones reported with their own line numbers and left out."""
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
                self._bad(line, exc.reason, line_no)
        return good

    def _route(self, etype: str) -> Callable[[bytes, float], None]:
        """A line of a known type, decoded (without its skippable value) straight into its
        handler; anything unexpected takes the general path, which reports it."""
        handler = self._handlers[etype]
        # Below this size skipping a value costs more (copies, a second decode) than it saves.
        # A value the encoder reads is never skipped.
        skippable = E.SKIPPABLE.get(etype)
        split_from = skippable[2] if skippable is not None and E.skipped_name(etype) not in self.encoder.needs else None

        def route(line: bytes, now: float) -> None:
            try:
                ev = (
                    E.split_parse(line, etype, checked=not self.options.trust_input)
                    if split_from is not None and len(line) >= split_from
                    else None
                )
                if ev is None:
                    ev = orjson.loads(line)
                    if type(ev) is not dict or ev.get("type") != etype:
                        raise BadLine("")
                    E.check(ev, etype)
            except (BadLine, orjson.JSONDecodeError):
                self._general(line, now)
                return
            self._handle(handler, ev, now, line)

        return route

    def _handle(self, handler: Callable[[Event, float, bytes], None], ev: Event, now: float, line: bytes) -> None:
        """Run an event's handler. The shape checks cover what the handlers read; should
        anything still fail, `_line`'s last resort takes it."""
        handler(ev, now, line)

    def _turn_start(self, ev: Event, now: float, line: bytes) -> None:
        if ev["turn_index"] == 0 and line:  # a new run (a raw TurnStart, not a headless stand-in)
            self._end_orphan()
        fr = self._frame
        index = ev["turn_index"]
        retry = fr is not None and fr.open_index == index
        # turn_index restarts at 0 after a completed turn only with a new run: the previous
        # RunEnd was lost. (Headless stand-ins number no runs: their runs end at a result or
        # an init, and a close in here would write through SILENT.)
        restart = fr is not None and not retry and index == 0 and fr.turns and line
        self._move(Move.RETRY if retry else Move.RESTART if restart else Move.TURN_START, now)
        self.model = ev["model"] if self.model is None else self.model
        fr = self._frame_for(now, ev)
        fr.saw_turn = True
        fr.turn_model = ev["model"]
        fr.message_ids.append(ev["message_id"])
        self._model_event(fr, now, ev)
        if retry:
            # The same turn sent again (the agent's max_tokens or drain retry): nothing of
            # the abandoned attempt is the reply. Its deltas still count as API time.
            fr.attempts += 1
            if fr.fallback is not None:
                del fr.fallback[fr.fallback_mark :]
            fr.tools.clear()
            self.encoder.turn_retry(ev, fr.attempts, self._stamp(now, ev))
            return
        fr.open_index = index
        fr.attempts = 0
        fr.fallback_mark = len(fr.fallback) if fr.fallback is not None else 0
        fr.turn_deltas = 0
        self.encoder.turn_start(ev, self._stamp(now, ev))

    def _text_delta(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._model_event(fr, now, ev)
        fr.turn_deltas += 1
        if fr.fallback is not None:
            fr.fallback.append((self.line_no, line))
        self.encoder.text_delta(ev, self._stamp(now, ev))

    def _thinking_delta(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._model_event(fr, now, ev)
        fr.turn_deltas += 1
        self.encoder.thinking_delta(ev, self._stamp(now, ev))

    def _tool_start(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._model_event(fr, now, ev)
        fr.tools[ev["tool_use_id"]] = (ev["name"], [])
        self.encoder.tool_start(ev, self._stamp(now, ev))

    def _tool_input(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._model_event(fr, now, ev)
        fr.turn_deltas += 1
        fr.tools.setdefault(ev["tool_use_id"], (None, []))[1].append(ev["partial_json"])
        self.encoder.tool_input(ev, self._stamp(now, ev))

    def _tool_end(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._move(Move.TOOL_END, now)
        name, parts = fr.tools.pop(ev["tool_use_id"], (None, []))
        fr.tool_calls += 1
        self.encoder.tool_call(
            ev["tool_use_id"], name, tool_input("".join(parts)), ev, self._stamp(now, ev)
        )

    def _turn_end(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._close_turn_span(fr, now, ev)
        fr.turns += 1
        if fr.first_ttft is None:
            fr.first_ttft = E.duration_s(ev["ttft"])
        usage = ev["usage"]
        total = fr.usage
        for key, value in usage.items():
            total[key] = total.get(key, 0) + value
        model = fr.turn_model or self.model
        cost = 0.0
        if model is not None:
            rate = self.rates.rate(model)
            if rate is not None:
                cost = turn_cost(rate, usage)
            elif model not in self._warned:
                self._warned.add(model)
                self._diags.append(
                    f"translator: warning: no rate for model {model!r}; its cost counts as 0"
                )
        fr.cost += cost
        message = ev["assistant_message"]
        text, last_block = E.reply(message)
        if text:
            fr.answer = text
            fr.fallback = None
            fr.last_text = last_block
        fr.stop_reason = ev["stop_reason"]
        self._move(Move.TURN_END, now)
        fr.open_index = None
        fr.turn_deltas = 0
        fr.tools.clear()
        self.encoder.turn_end(ev, model, cost, self._stamp(now, ev))

    def _run_end(self, ev: Event, now: float, line: bytes) -> None:
        fr = self._frame_for(now, ev)
        self._close_turn_span(fr, now, None)
        subtype, error = classify(ev["stopped_for"])
        self._finish(self._summary(fr, now, subtype, error, ev), self._stamp(now, ev))


def ends_run(line: bytes) -> bool:
    """Whether a line is a run's last event (a RunEnd, or a headless result)."""
    try:
        return E.loads(line).get("type") in (E.RUN_END, H.RESULT)
    except (BadLine, AttributeError):
        return False


def plain_result(session_id: str | None, error: str) -> bytes:
    """A result frame that needs nothing but its error text: written when an encoder failed
    even to write a run's result, so that the run still has one."""
    frame = {"type": "result", "subtype": "error", "is_error": True, "error": error, "session_id": session_id}
    return orjson.dumps(frame) + b"\n"


def tool_input(raw: str) -> Any:
    """A tool call's input from its concatenated `partial_json`: the parsed JSON, the raw string
    when it does not parse (as the model sent it), `{}` when there was none."""
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
