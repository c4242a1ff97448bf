"""The OpenTelemetry SDK set up as Claude Code's exporter: one meter, logger and tracer provider
per process, each with its bounded batch queue and its thread, flushed at exit within
CLOSE_S whatever the collector does.

A collector that is down or slow never reaches the translation: exports run on the SDK's
threads; what they fail to deliver, and what a full queue drops, is counted and said once at
exit, on stderr (the SDK's own log lines are kept off stderr). This is the only module that
imports the SDK, and it is imported only when telemetry is on.
"""

from __future__ import annotations

import logging
import platform
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter, SpanExportResult

from translator.diagnostics import stderr as _stderr
from translator.telemetry import otlp
from translator.telemetry.names import CLAUDE_CODE_VERSION, EVENTS_SCOPE, METER_SCOPE, TRACER_SCOPE, TRACER_VERSION
from translator.telemetry.session import Instruments, Session
from translator.telemetry.settings import Settings, Signal
from translator.version import __version__

CLOSE_S = 4.0  # the most the exit waits for the last exports (the bound is 5 s)
DELTA = AggregationTemporality.DELTA
CUMULATIVE = AggregationTemporality.CUMULATIVE


class Losses(logging.Handler):
    """What did not reach the collector: the records made less those an export delivered (a
    failed export, a full queue, what is still queued at the deadline), and the first thing the
    SDK said went wrong (its log lines are counted here, not printed)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.tally = threading.Lock()
        self.delivered: dict[str, int] = {"metrics": 0, "logs": 0, "traces": 0}
        self.metrics_failed = False
        self.first: str | None = None

    def sent(self, signal: str, count: int) -> None:
        with self.tally:
            self.delivered[signal] += count

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is None:
            self.first = _reason(record)

    def summary(self, made: dict[str, int]) -> str | None:
        lost = [f"{n} {name}" for name in ("logs", "traces") if (n := made[name] - self.delivered[name]) > 0]
        if self.metrics_failed:
            lost.append("metrics")
        if not lost:
            return None
        why = f" ({self.first})" if self.first else ""
        return f"translator: telemetry: not exported: {', '.join(lost)}{why}"


def _reason(record: logging.LogRecord) -> str:
    """What the SDK's record says went wrong, whole: an exception among its arguments as its
    innermost cause's words (`Connection refused`: requests' error holds urllib3's, which holds
    the socket's, each repr inside the other; cut short they ended mid-word), else its first line."""
    error = next((arg for arg in record.args or () if isinstance(arg, BaseException)), None)
    if error is None:
        return record.getMessage().splitlines()[0]
    for _ in range(8):  # requests -> urllib3's MaxRetryError -> its reason -> the OSError
        inner = getattr(error, "reason", None) or error.__cause__ or (error.args[0] if error.args else None)
        if not isinstance(inner, BaseException):
            break
        error = inner
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    said = re.search(r"\[Errno -?\d+\] (.+)", text)  # "...: [Errno 111] Connection refused"
    return said[1] if said else text


class CountedSpans(SpanExporter):
    def __init__(self, inner: SpanExporter, losses: Losses) -> None:
        self.inner, self.losses = inner, losses

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result == SpanExportResult.SUCCESS:
            self.losses.sent("traces", len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountedLogs(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, losses: Losses) -> None:
        self.inner, self.losses = inner, losses

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = self.inner.export(batch)
        if result == LogRecordExportResult.SUCCESS:
            self.losses.sent("logs", len(batch))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountedMetrics(MetricExporter):
    """The metric exporter, its temporality Claude Code's (DELTA unless told otherwise)."""

    def __init__(self, inner: MetricExporter, losses: Losses, temporality: dict[type, AggregationTemporality]) -> None:
        super().__init__(preferred_temporality=temporality)
        self.inner, self.losses = inner, losses

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.losses.metrics_failed = True  # until it is delivered
        result = self.inner.export(metrics_data, timeout_millis=timeout_millis)
        self.losses.metrics_failed = result != MetricExportResult.SUCCESS
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def temporality(preference: str) -> dict[type, AggregationTemporality]:
    """The counters' temporality: Claude Code's DELTA by default; `cumulative` and `lowmemory`
    (DELTA for counters) as the OTLP exporters read the variable."""
    return {Counter: CUMULATIVE if preference == "cumulative" else DELTA}


def resource(settings: Settings) -> Resource:
    """Claude Code's resource attributes, with OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    over them, as settings.py read them (a dashboard that filters on service.name "claude-code"
    sees caliban's runs)."""
    machine = platform.machine().lower()
    own = {"host.arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine),
           "os.type": sys.platform if sys.platform != "linux2" else "linux", "os.version": platform.release(),
           "service.name": "claude-code", "service.version": __version__}
    return Resource(own | dict(settings.resource))


def _quiet_threads(losses: Losses) -> None:
    """An SDK thread that dies (a reader's timer, a processor's worker) is counted, not printed:
    its traceback would be the only thing on stderr of a run that went well otherwise."""
    earlier = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else ""
        if not name.startswith(("Otel", "telemetry", "Thread-")) or args.exc_type is SystemExit:
            earlier(args)
            return
        losses.first = losses.first or f"{name}: {args.exc_type.__name__}: {args.exc_value}".splitlines()[0]

    threading.excepthook = hook


class Telemetry:
    """The process's exporter (a `Watch`): one `Session` per input stream."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.losses = Losses()
        sdk_log = logging.getLogger("opentelemetry")
        sdk_log.addHandler(self.losses)
        sdk_log.propagate = False  # its warnings counted here, not printed on stderr
        _quiet_threads(self.losses)
        res = resource(settings)
        self.meters: MeterProvider | None = None
        self.logs: LoggerProvider | None = None
        self.traces: TracerProvider | None = None
        self.scrape: Any = None  # a Prometheus endpoint (prometheus.Endpoint), served until the close
        for name, how in settings.signals.items():
            try:
                self._provide(name, how, res)
            except Exception as exc:  # one line, that signal off: the run goes on without it
                _stderr([f"translator: telemetry: {name}: {how.exporter} cannot start: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
                         + f"; {name} not exported"], "warning")
        self.instruments = Instruments(
            meter=None if self.meters is None else self.meters.get_meter(METER_SCOPE, CLAUDE_CODE_VERSION),
            logger=None if self.logs is None else self.logs.get_logger(EVENTS_SCOPE, CLAUDE_CODE_VERSION),
            tracer=None if self.traces is None else self.traces.get_tracer(TRACER_SCOPE, TRACER_VERSION),
            settings=settings,
        )
        self.closed = self.slow = self.said = False

    def _provide(self, name: str, how: Signal, res: Resource) -> None:
        """One signal's provider, its exporter and its bounded queue, from what settings.py read."""
        if name == "metrics" and how.exporter == "prometheus":
            from translator.telemetry.prometheus import Endpoint

            self.scrape = Endpoint(*self.settings.scrape)
            self.meters = MeterProvider(metric_readers=[self.scrape.reader], resource=res, shutdown_on_exit=False)
        elif name == "metrics":
            exporter = CountedMetrics(self._exporter("metrics", how), self.losses, temporality(self.settings.temporality))
            reader = PeriodicExportingMetricReader(exporter, export_interval_millis=how.interval_ms,
                                                   export_timeout_millis=how.timeout_ms)
            self.meters = MeterProvider(metric_readers=[reader], resource=res, shutdown_on_exit=False)
        elif name == "logs":
            logs = LoggerProvider(resource=res, shutdown_on_exit=False)
            logs.add_log_record_processor(BatchLogRecordProcessor(
                CountedLogs(self._exporter("logs", how), self.losses), schedule_delay_millis=how.interval_ms,
                max_queue_size=how.queue, max_export_batch_size=how.batch, export_timeout_millis=how.timeout_ms))
            self.logs = logs
        else:
            traces = TracerProvider(resource=res, shutdown_on_exit=False)
            traces.add_span_processor(BatchSpanProcessor(
                CountedSpans(self._exporter("traces", how), self.losses), schedule_delay_millis=how.interval_ms,
                max_queue_size=how.queue, max_export_batch_size=how.batch, export_timeout_millis=how.timeout_ms))
            self.traces = traces

    def _exporter(self, signal: str, how: Signal) -> Any:
        if how.exporter == "console":  # stdout is data: the console goes to stderr
            console = {"metrics": ConsoleMetricExporter, "logs": ConsoleLogRecordExporter,
                       "traces": ConsoleSpanExporter}[signal]
            return console(out=sys.stderr)
        assert how.otlp is not None
        return otlp.exporter(signal, how.protocol, how.otlp)

    def stream(self, source: str, session_id: str, t: float, resumed: bool = False) -> Session:
        """A stream's session (`resumed`: the shim's --resume, Claude Code's start_type resume)."""
        return Session(self.instruments, session_id, t, resumed)

    def drain(self) -> None:
        pass  # (its processors export in their own threads)

    def close(self, within: float = CLOSE_S) -> None:
        """The last exports, within `within` seconds all told: what is left then is dropped
        (the SDK's threads are daemons) and said, with every loss, in one line."""
        if self.closed:
            return
        self.closed = True
        self._wait([p.shutdown for p in (self.traces, self.logs, self.meters) if p is not None], within)
        if self.scrape is not None:
            self.scrape.close()
        self.say()
        logging.getLogger("opentelemetry").removeHandler(self.losses)

    def flush(self, within: float = CLOSE_S) -> None:
        """What is queued, exported now (a batch worker, after each chunk of files): within
        `within` seconds, and not waited for again once the collector has not answered."""
        within = 0.0 if self.slow else within
        self._wait([p.force_flush for p in (self.traces, self.logs, self.meters) if p is not None], within)
        if self.losses.summary(self.instruments.made) is not None:
            self.say()

    def _wait(self, calls: list[Callable[[], object]], within: float) -> None:
        deadline = time.monotonic() + max(0.0, within)
        threads = [threading.Thread(target=call, name="telemetry-flush", daemon=True) for call in calls]
        for thread in threads:  # side by side: a stuck signal does not hold the others up
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            self.slow = True
            self.losses.first = self.losses.first or f"the collector did not answer within {within:g} s"
            if self.meters is not None and threads[-1].is_alive():
                self.losses.metrics_failed = True

    def say(self) -> None:
        """What was lost, once (a worker flushing after each chunk says it the first time)."""
        if not self.said and (said := self.losses.summary(self.instruments.made)) is not None:
            self.said = True
            _stderr([said], "warning")
