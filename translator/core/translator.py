"""The sans-I/O core: bytes of one input stream in, output frames and diagnostics out.

`Translator` is the facade over the parts: chunks become lines (lines.py), lines become values
(raw.py: events, headless frames, bad lines, lines to pass through; reading.py), headless frames
become the fold's moves (headless.py), and events move the run fold it owns (fold.py). It owns
the line numbers, and hands what goes wrong to the one error policy (policy.py: the readers'
bad lines come back as values, as jc's streaming parsers' errors do). It never reads, writes
or looks at a clock: the caller passes each chunk with the time it arrived (`now`, monotonic
seconds) and collects what came out with `take_output()` and `take_diagnostics()`. One agent run (ADR 0049's "input frame") is closed by its `RunEnd`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import groupby
from operator import attrgetter

from translator import model as M
from translator.core.fold import Options as Options  # re-exported: every shell builds one here
from translator.core.fold import RunFold
from translator.core.headless import HeadlessReader
from translator.core.jsonl import BadLine, last_event
from translator.core.lines import LineBuffer
from translator.core.policy import Policy
from translator.core.rates import RateCard
from translator.core.raw import RawReader
from translator.core.reading import Foreign, Headless, Item, Passthrough, Reader
from translator.core.stops import LOST_RUN_END as LOST_RUN_END  # re-exported: callers read them here
from translator.core.stops import THINKING_BUDGET as THINKING_BUDGET
from translator.core.stops import TRUNCATED as TRUNCATED
from translator.encoders import Encoder
from translator.model import ESTIMATED as ESTIMATED  # re-exported: the clocks are read from here too
from translator.model import RECORDED as RECORDED
from translator.model import WALL as WALL
from translator.model import Delta, DeltaRun

IS_DELTA = attrgetter("is_delta")
NEWLINE = 0x0A
# Blank lines, and lines of JSON whitespace only (spaces, tabs, a CRLF file's blank line): never
# an event, counted and skipped; a run of them at a line's start, and the next one after a newline.
BLANKS = re.compile(rb"(?:[ \t\r]*\n)+")
NEXT_BLANK = re.compile(rb"\n[ \t\r]*\n")
CLAUDE_CODE_INPUT = ("Claude Code's own output (claude -p stream-json, or --format claude-code), not the agent's "
                     "events: skipped, this line and the rest of it")


class Translator:
    """One input stream's translation. Feed bytes; collect frames; `end()` or `cancel()` once.
    The run fold (`fold`, fold.py) turns events into frames; this adds the bytes, lines and errors."""

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
        self.source = source
        self.line_no = 0
        self.frames_written = 0  # output frames taken so far
        self.stopped = False  # after --on-invalid fail, or end()/cancel()
        self._out = encoder.out
        self._diags: list[str] = []
        self._rejects: list[bytes] = []
        self.fold = RunFold(
            encoder, rates=rates, options=opts, started_at=started_at, source=source,
            line_no=lambda: self.line_no, diags=self._diags,
        )  # fmt: skip
        self._runs = self.fold.runs
        self._moves = self.fold.moves
        self._lines = LineBuffer(opts.max_line_bytes, self._rejects.append, self._skipped)
        self._raw: Reader = RawReader(opts, self._runs.use_recorded_clock)
        self._headless = HeadlessReader(self.fold)
        self._policy = Policy(source, opts.stop_on_invalid, self._runs, self._rejects, self._diags)

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

    def _skipped(self, reason: str, excerpt: bytes) -> None:
        """A line the buffer skipped has ended: it is reported as a line of its own (an
        over-long RunEnd, a long session's whole history, still ends its run)."""
        self.line_no += 1
        self.stopped = self._policy.skipped(reason, excerpt, self.line_no, self.stopped)

    def end(self, now: float) -> None:
        """The input ended: a last line without newline counts; an open frame is closed."""
        if self.stopped:
            return
        try:
            line = self._lines.finish()
            if line is not None:
                self._line(line, now)
            if not self.stopped:
                self._runs.input_end(now)
        except Exception as exc:
            self._fault(exc, None, now)
        self.stopped = True

    def cancel(self, now: float) -> None:
        """A signal stopped us: the open frame ends as `cancelled`."""
        if not self.stopped:
            try:
                self._runs.close(now, "cancelled", None)
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
        pieces = self._rejects[:]
        self._rejects.clear()
        return pieces

    @property
    def run_open(self) -> bool:
        return self._runs.run is not None

    # What the fold knows of the stream's runs, read here by the shells and the library.
    @property
    def clock(self) -> str:
        """The clock the stream is timed by (`--clock auto` decides at the first event)."""
        return self._runs.clock.kind

    @property
    def runs_closed(self) -> int:
        return self._runs.runs_closed

    @property
    def last_subtype(self) -> str | None:
        return self._runs.last_subtype

    # ------------------------------------------------------------------ lines

    def _block(self, data: bytes, pos: int, end: int, now: float) -> None:
        """Complete lines `data[pos:end]` (each ends with a newline), `end` just past the
        chunk's last newline. Blank and whitespace-only lines are counted, nothing more (a run
        of them is one match in C); the stretches between them go to the hot path, each a batch
        (one such line sent its whole stretch line by line: twice the time). The usual chunk has
        none, so it is tried whole first: one fails the batch decode, and the search for them (a
        pass over every byte) is made only then."""
        if pos < end and data[pos] != NEWLINE and (batch := self._raw.chunk(data, pos, end, True)) is not None:
            self._batched(batch, now)
            return
        while pos < end and not self.stopped:
            blanks = BLANKS.match(data, pos, end)
            if blanks is not None:
                stop = blanks.end()
                self.line_no += data.count(b"\n", pos, stop)
            else:
                blank = NEXT_BLANK.search(data, pos, end)
                stop = end if blank is None else blank.start() + 1
                self._stretch(data, pos, stop, now, stop == end)
            pos = stop

    def _stretch(self, data: bytes, pos: int, end: int, now: float, last: bool) -> None:
        """Lines `data[pos:end]`, none of them blank (`last`: the chunk's last newline ends
        them): one batch when they all decode (the hot path), else one by one."""
        batch = self._raw.chunk(data, pos, end, last)
        if batch is not None:
            self._batched(batch, now)
            return
        start = pos
        while start < end and not self.stopped:
            nl = data.index(b"\n", start, end)
            self._line(data[start:nl], now)
            start = nl + 1

    def _batched(self, batch: tuple[list[M.TurnEvent], list[bytes]], now: float) -> None:
        """A batch of raw events with their lines, numbered and applied."""
        evs, lines = batch
        first_no = self.line_no + 1
        self.line_no += len(lines)
        self._events(evs, first_no, now, lines.__getitem__)

    def _line(self, line: bytes, now: float) -> None:
        """One line, read on its own, and what it was applied."""
        self.line_no += 1
        try:
            if len(line) > self.options.max_line_bytes:
                self._bad(BadLine(f"line longer than {self.options.max_line_bytes} bytes ({len(line)} bytes)", line,
                                  last_event(line)))
            else:
                self._apply(self._raw.read(line), now)
        except Exception as exc:
            self._fault(exc, line, now)

    def _apply(self, items: list[Item], now: float) -> None:
        """What a line was read into, in order, until the stream stops."""
        for item in items:
            if isinstance(item, BadLine):
                self._bad(item)
            elif isinstance(item, Headless):
                self._headless.read(item, now)
            elif isinstance(item, Passthrough):
                self._runs.encoder.passthrough(item.line)
            elif isinstance(item, Foreign):  # rejected as it came; said once
                self._rejects.append(item.line + b"\n")
                if item.first:
                    self.stopped = self._policy.report(CLAUDE_CODE_INPUT, item.line, self.line_no, self.stopped)
            elif item.is_delta:
                self.fold.deltas(DeltaRun([item]), now)  # type: ignore[list-item]  # (is_delta: a Delta)
            else:
                self._moves[type(item)](item, now)
            if self.stopped:
                return

    def _events(self, evs: list[M.TurnEvent], first_no: int, now: float, line_of: Callable[[int], bytes]) -> None:
        """A batch of events, one per line from line `first_no` on, every one checked: each
        run of deltas in it moves the fold as one. `line_of(k)`: the k-th line's bytes, for
        the reject file if its event makes the fold fail. The runs are found in C (`groupby`):
        a run costs one step here, not one a delta."""
        moves, deltas_move = self._moves, self.fold.deltas
        k = 0  # the next event's place in the batch
        for deltas, group in groupby(evs, IS_DELTA):
            if deltas:
                run: list[Delta] = list(group)  # type: ignore[arg-type]
                k += len(run)
                self.line_no = first_no + k - 1
                try:
                    deltas_move(DeltaRun(run), now)
                except Exception as exc:
                    self._fault(exc, line_of(k - 1), now)
                if self.stopped:
                    return
                continue
            for ev in group:
                self.line_no = first_no + k
                try:
                    moves[type(ev)](ev, now)
                except Exception as exc:
                    self._fault(exc, line_of(k), now)
                if self.stopped:
                    return
                k += 1

    # ------------------------------------------------------------------ the error policy (policy.py)

    @property
    def bad_lines(self) -> int:
        return self._policy.bad_lines

    def _bad(self, bad: BadLine) -> None:
        self.stopped = self._policy.bad(bad, self.line_no, self.stopped)

    def _fault(self, exc: Exception, line: bytes | None, now: float) -> None:
        self.stopped = self._policy.fault(exc, line, self.line_no, now, self.stopped)
