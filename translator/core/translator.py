"""The sans-I/O core: bytes of one input stream in, output frames and diagnostics out.

`Translator` ties the parts together: chunks become lines (lines.py), lines become events
(raw.py, headless.py), and the events move the run fold (fold.py, states.py);
it owns line numbers and per-line error handling. It never reads, writes or looks at a clock: the caller passes each chunk with the time it
arrived (`now`, monotonic seconds) and collects what came out with `take_output()` and
`take_diagnostics()`. One input frame is one agent run, closed by its `RunEnd`.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby
from operator import attrgetter
from typing import Any

from translator import model as M
from translator.core import headless_result as H
from translator.core import jsonl as E
from translator.core.fold import Options as Options  # re-exported: every shell builds one here
from translator.core.fold import RunFold
from translator.core.headless import HeadlessReader
from translator.core.jsonl import BadLine
from translator.core.rates import RateCard
from translator.core.raw import RawReader
from translator.core.states import Move
from translator.core.stops import LOST_RUN_END as LOST_RUN_END  # re-exported: callers read them here
from translator.core.stops import THINKING_BUDGET as THINKING_BUDGET
from translator.core.stops import TRUNCATED as TRUNCATED
from translator.diagnostics import Diagnostic
from translator.encoders import SILENT, Encoder
from translator.lines import EXCERPT_BYTES, LineBuffer
from translator.model import ESTIMATED as ESTIMATED  # re-exported: the clocks are read from here too
from translator.model import RECORDED as RECORDED
from translator.model import WALL as WALL
from translator.model import Delta, DeltaRun

IS_DELTA = attrgetter("is_delta")


class Translator(RunFold):
    """One input stream's translation. Feed bytes; collect frames; `end()` or `cancel()` once.
    The run fold (fold.py) turns events into frames; this adds the bytes, lines and errors."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        rates: RateCard,
        options: Options | None = None,
        started_at: float = 0.0,
        source: str = "<stdin>",
    ) -> None:
        super().__init__(encoder, rates=rates, options=options or Options(), started_at=started_at)
        opts = self.options
        self.source = source
        self.line_no = 0
        self.bad_lines = 0
        self.frames_written = 0  # output frames taken so far
        self.stopped = False  # after --on-invalid fail, or end()/cancel()
        self._rejects: list[bytes] = []
        self._lines = LineBuffer(opts.max_line_bytes, self._reject, self._skipped)
        self._reader = RawReader(self, HeadlessReader(self))
        # Every event but the deltas (which move as runs) goes to its handler by class.
        self._handlers: dict[type, Callable[[Any, float], None]] = {
            M.TurnStart: self._turn_start,
            M.ToolCallStart: self._tool_start,
            M.ToolCallInputDelta: self._tool_input,
            M.ToolCallEnd: self._tool_end,
            M.TurnEnd: self._turn_end,
            M.RunEnd: self._run_end,
        }

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
            self._reader.block(rest, pos, last_nl + 1, now)
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

    def _line(self, line: bytes, now: float) -> None:
        """One line, decoded on its own."""
        self.line_no += 1
        try:
            if len(line) > self.options.max_line_bytes:
                self._bad(line, f"line longer than {self.options.max_line_bytes} bytes ({len(line)} bytes)")
            else:
                self._reader.content(line, now)
        except Exception as exc:
            self._fault(exc, line, now)

    def events(self, evs: list[M.TurnEvent], first_no: int, now: float, line_of: Callable[[int], bytes]) -> None:
        """A batch of events, one per line from line `first_no` on, every one checked: each
        run of deltas in it moves the fold as one. `line_of(k)`: the k-th line's bytes, for
        the reject file if its event makes the fold fail. The runs are found in C (`groupby`):
        a run costs one step here, not one a delta."""
        handlers = self._handlers
        k = 0  # the next event's place in the batch
        for deltas, group in groupby(evs, IS_DELTA):
            if deltas:
                run: list[Delta] = list(group)  # type: ignore[arg-type]
                k += len(run)
                self.line_no = first_no + k - 1
                try:
                    self._deltas(DeltaRun(run), now)
                except Exception as exc:
                    self._fault(exc, line_of(k - 1), now)
                if self.stopped:
                    return
                continue
            for ev in group:
                self.line_no = first_no + k
                try:
                    handlers[type(ev)](ev, now)
                except Exception as exc:
                    self._fault(exc, line_of(k), now)
                if self.stopped:
                    return
                k += 1

    def event(self, ev: M.TurnEvent, now: float) -> None:
        """One event of the line just read."""
        if ev.is_delta:
            self._deltas(DeltaRun([ev]), now)  # type: ignore[list-item]
        else:
            self._handlers[type(ev)](ev, now)

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

def ends_run(line: bytes) -> bool:
    """Whether a line is a run's last event (a RunEnd, or a headless result)."""
    try:
        return E.loads(line).get("type") in ("RunEnd", H.RESULT)
    except (BadLine, AttributeError):
        return False
