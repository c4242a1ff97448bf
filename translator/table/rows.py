"""Each run's result as one flat row, seen by the pass that translates (no second read).

`Recorder` watches the stream beside the frames (encoders/observed.py), noting what the results
table needs: the models a run used, its first and last event times, and the result frame
itself, built exactly as the default format writes it (so the table and the outputs agree field
for field whatever `--format` was asked for).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from translator.encoders import RunSummary
from translator.encoders.enriched import repair, result_frame
from translator.encoders.observed import Quiet, StreamId
from translator.model import TurnEnd, TurnStart

RECORDED = "recorded"


def date_of(seconds: float) -> str:
    """The UTC day of a Unix time, the results table's partition."""
    try:
        return datetime.fromtimestamp(seconds, UTC).date().isoformat()
    except (OverflowError, OSError, ValueError):
        return "1970-01-01"


def _ms(seconds: float | None) -> int | None:
    if seconds is None:
        return None
    try:
        return round(seconds * 1000)
    except (OverflowError, ValueError):
        return None


class Recorder(Quiet):
    """An observer of one stream that keeps one row per result: the models a run used, its
    first and last event times, and the result frame built as the default format writes it."""

    def __init__(self, mtime: float) -> None:
        self.rows: list[dict[str, Any]] = []
        self._session = ""
        self._source = ""
        self._mtime = mtime
        self._models: list[str] = []
        self._first_t: float | None = None

    def _model(self, model: Any) -> None:
        if isinstance(model, str) and model and model not in self._models:
            self._models.append(model)

    def stream_open(self, stream: StreamId, t: float) -> None:
        self._session, self._source = stream.session_id, stream.source

    def run_start(self, model: str | None, t: float) -> None:
        self._first_t = t
        self._model(model)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self._model(ev.model)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self._model(model)

    def run_end(self, run: RunSummary, t: float) -> None:
        frame = repair(run.upstream, run) if run.upstream is not None else result_frame(run, self._session)
        self.rows.append(self.row(frame, run, t))
        self._models, self._first_t = [], None

    def row(self, frame: dict[str, Any], run: RunSummary, t: float) -> dict[str, Any]:
        """The table's columns (table.parquet.COLUMNS), from the result frame as written."""
        recorded = run.duration_source == RECORDED
        first = self._first_t if recorded else None
        usage = frame.get("usage")
        usage = usage if isinstance(usage, dict) else {}

        def count(key: str) -> int | None:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        def number(key: str, kind: type) -> Any:
            value = frame.get(key)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        error = frame.get("error")
        return {
            "source": self._source,
            "run_index": len(self.rows),
            "session_id": str(frame.get("session_id", self._session)),
            "subtype": str(frame.get("subtype", run.subtype)),
            "is_error": bool(frame.get("is_error", run.subtype != "success")),
            "num_turns": number("num_turns", int),
            "input_tokens": count("input_tokens"),
            "output_tokens": count("output_tokens"),
            "cache_read_input_tokens": count("cache_read_input_tokens"),
            "cache_creation_input_tokens": count("cache_creation_input_tokens"),
            "total_cost_usd": float(frame["total_cost_usd"]) if isinstance(frame.get("total_cost_usd"), int | float) else None,
            "duration_ms": number("duration_ms", int),
            "duration_api_ms": number("duration_api_ms", int),
            "duration_source": run.duration_source,
            "model": self._models[0] if self._models else None,
            "models": list(self._models),
            "error": error if isinstance(error, str) else None,
            "tool_calls": run.tool_calls,
            "first_ts_ms": _ms(first),
            "last_ts_ms": _ms(t) if recorded else None,
            "log_mtime_ms": _ms(self._mtime),
            "date": date_of(first if first is not None else self._mtime),
        }
