"""What a bad line costs, decided in one place (after jc's streaming parsers: errors come back
as values, and one function applies the policy to them).

A bad line — a reader's `BadLine`, or a line the buffer skipped — is rejected as it came and
reported at its number, and under `--on-invalid fail` the stream stops there, its open run
closed as an error. A failure nothing foresaw (`fault`) is reported and rejected the same way;
the open run ends with an error result (its state is in doubt) and the rest of it is read into
nothing, so that it has one result, while the stream goes on with the next line.
"""

from __future__ import annotations

from translator.core import headless_result as H
from translator.core import jsonl as E
from translator.core.jsonl import BadLine, last_event
from translator.core.lines import EXCERPT_BYTES
from translator.core.runs import Runs
from translator.diagnostics import Diagnostic


class Policy:
    """The one error policy of a stream: each method says whether the stream is stopped after
    what it was told (`stopped`: whether it was before)."""

    def __init__(self, source: str, stop_on_invalid: bool, runs: Runs, rejects: list[bytes], diags: list[str]) -> None:
        self.source = source
        self.bad_lines = 0
        self._stop_on_invalid = stop_on_invalid
        self._runs = runs
        self._rejects = rejects
        self._diags = diags

    def bad(self, bad: BadLine, line_no: int, stopped: bool) -> bool:
        """A bad line: its bytes to the rejects, its reason said. A run's last event so
        rejected (a RunEnd, a headless result) still ends its run, with an error result that
        says why (else the next run's events were read as the same run's: one result lost, and
        a live stream's result waited for the next run or the end)."""
        self._rejects.append(bad.line + b"\n")
        stopped = self.report(bad.reason, bad.line, line_no, stopped)
        if bad.ends_run:
            self._last_event_rejected(bad.ends_run, bad.reason, line_no, stopped)
        return stopped

    def skipped(self, reason: str, excerpt: bytes, line_no: int, stopped: bool) -> bool:
        """A line the buffer skipped (over-long): said; an over-long RunEnd (a long session's
        whole history) or headless result still ends its run."""
        stopped = self.report(reason, excerpt, line_no, stopped)
        last = last_event(excerpt)
        if last:
            self._last_event_rejected(last, reason, line_no, stopped)
        return stopped

    def _last_event_rejected(self, etype: str, reason: str, line_no: int, stopped: bool) -> None:
        """A rejected RunEnd (or headless result, `etype`) still ends its run: an error result
        that says why."""
        if not stopped:
            self._runs.abort(self._runs.now_guess(), f"its {etype} was rejected at line {line_no}: {reason}")

    def report(self, reason: str, line: bytes, line_no: int, stopped: bool) -> bool:
        """A line said on stderr at its number; under --on-invalid fail the stream stops."""
        self.bad_lines += 1
        excerpt = line[:EXCERPT_BYTES].decode("utf-8", "backslashreplace").rstrip("\r")
        self._diags.append(Diagnostic(self.source, line_no, reason, excerpt))
        if self._stop_on_invalid and not stopped:
            self._runs.abort(self._runs.now_guess(), f"input rejected at line {line_no}: {reason}")
            return True
        return stopped

    def fault(self, exc: Exception, line: bytes | None, line_no: int, now: float, stopped: bool) -> bool:
        """The last resort: `line` (if one is at fault) rejected and reported, the open run
        ended with an error result, the rest of it skipped."""
        if line is not None:
            self._rejects.append(line + b"\n")
        why = f"cannot be translated (internal error, {type(exc).__name__}: {exc})"
        stopped = self.report(why, line or b"", line_no, stopped)
        self._runs.abort(now, f"internal error at line {line_no}: {type(exc).__name__}")
        if not (line is not None and ends_run(line)):
            self._runs.skip_rest()
        return stopped


def ends_run(line: bytes) -> bool:
    """Whether a line is a run's last event (a RunEnd, or a headless result)."""
    try:
        return E.loads(line).get("type") in ("RunEnd", H.RESULT)
    except (BadLine, AttributeError):
        return False
