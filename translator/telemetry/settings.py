"""Claude Code's telemetry switches, read from the environment (no SDK needed to read them).

Every variable the SDK or its exporters would otherwise read themselves is read here instead
and handed to them as a value: which signals go where, the protocol, the intervals, the
temporality (DELTA unless told), what text may leave the machine, and the queues, timeouts,
endpoints, headers, compression and certificates of each signal (telemetry/otlp.py). A value
the SDK would choke on (a queue of -1, an interval past what a timer holds, a certificate that
is not there) is one note naming it, and that signal is off; nothing of it reaches the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from translator.telemetry.otlp import Otlp, pairs, read_otlp

SIGNALS = ("metrics", "logs", "traces")
PROTOCOLS = ("grpc", "http/protobuf", "http/json")
EXPORTERS = {"metrics": ("otlp", "prometheus", "console"), "logs": ("otlp", "console"),
             "traces": ("otlp", "console")}  # `none` (or unset) exports nothing, as in Claude Code
TEMPORALITIES = ("delta", "cumulative", "lowmemory")
BETA = "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA"
# Claude Code's intervals when none is set (ms): metrics a minute, logs and traces 5 s.
DEFAULT_INTERVAL_MS = {"metrics": 60_000, "logs": 5_000, "traces": 5_000}
INTERVAL = {"metrics": "OTEL_METRIC_EXPORT_INTERVAL", "logs": "OTEL_LOGS_EXPORT_INTERVAL",
            "traces": "OTEL_TRACES_EXPORT_INTERVAL"}
MAX_MS = 2**31 - 1  # the longest a timer holds in Claude Code (JavaScript's setTimeout): ~24.8 days
# The batch processors' variables (logs: BLRP, traces: BSP), their defaults and most: a queue of
# at most 65,536 records is the bound on what a signal keeps for a collector that is not there.
BATCH = {"logs": "OTEL_BLRP_", "traces": "OTEL_BSP_"}
QUEUE_MAX = 65_536
# The SDK's defaults when none is set: the batch processors' queue and batch, and one export's
# timeout (theirs and the metric reader's).
DEFAULT_QUEUE = 2048
DEFAULT_BATCH = 512
DEFAULT_EXPORT_TIMEOUT_MS = 30_000
CONSOLE_OFF = ("console: Claude Code prints it only beside text output, never beside json or stream-json "
               "(here stdout is data)")
PROMETHEUS_PORT = 9464  # Claude Code's scrape endpoint: *:9464 unless OTEL_EXPORTER_PROMETHEUS_HOST/PORT say


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


class Bad(ValueError):
    """A variable the SDK would choke on: its note, and the signal it turns off."""


class Signal(msgspec.Struct, frozen=True):
    """Where one signal goes: `otlp` (with its protocol and connection), `prometheus` (a scrape
    endpoint) or `console` (stderr: stdout is data), and its batching."""

    exporter: str
    protocol: str
    interval_ms: int
    queue: int = DEFAULT_QUEUE  # records kept for the next export, at most
    batch: int = DEFAULT_BATCH  # records per export
    timeout_ms: int = DEFAULT_EXPORT_TIMEOUT_MS  # one export, at most
    otlp: Otlp | None = None


class Settings(msgspec.Struct, frozen=True):
    signals: dict[str, Signal]
    temporality: str  # delta | cumulative | lowmemory
    log_prompts: bool  # OTEL_LOG_USER_PROMPTS: prompt and response text, else "<REDACTED>"
    tool_details: bool  # OTEL_LOG_TOOL_DETAILS: tool_parameters and tool_input
    terminal: str  # terminal.type
    notes: tuple[str, ...] = ()  # what was asked and cannot be done, said once at start
    resource: tuple[tuple[str, str], ...] = ()  # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, read
    scrape: tuple[str, int] = ("", PROMETHEUS_PORT)  # the Prometheus endpoint's host ("": every) and port

    @property
    def exports_anything(self) -> bool:
        return bool(self.signals)

    @classmethod
    def read(cls, environ: Mapping[str, str], terminal: str = "non-interactive", lasting: bool = True,
             formatted: bool = True) -> Settings:
        """`lasting`: the process lives on after its input (--follow, --listen, the shim), so a
        scrape endpoint can be scraped; a one-shot replay says it cannot. `formatted`: stdout
        carries json or stream-json, beside which Claude Code prints no console exporter."""
        notes: list[str] = []
        off: dict[str, list[str]] = {}  # what turned signals off: one line for all it turned off
        signals: dict[str, Signal] = {}
        base_protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf"
        for name in SIGNALS:
            asked = [e.strip() for e in environ.get(f"OTEL_{name.upper()}_EXPORTER", "").split(",") if e.strip()]
            notes += [f"OTEL_{name.upper()}_EXPORTER={e} is not supported ({', '.join(EXPORTERS[name])}, none)"
                      for e in asked if e not in (*EXPORTERS[name], "none")]
            exporter = next((e for e in asked if e in EXPORTERS[name]), None)
            if exporter is None or (name == "traces" and not _true(environ.get(BETA))):
                continue  # Claude Code sends spans only with the beta flag
            if exporter == "console" and formatted:
                off.setdefault(CONSOLE_OFF, []).append(name)
                continue
            if exporter == "prometheus" and not lasting:
                notes.append("OTEL_METRICS_EXPORTER=prometheus: a scrape endpoint of a process that exits at once "
                             "shows nothing; metrics not exported (export them with otlp to a collector)")
                continue
            try:
                signals[name] = _signal(environ, name, exporter, base_protocol, notes)
            except Bad as exc:
                off.setdefault(str(exc), []).append(name)
        notes += [f"{why}; {', '.join(names)} not exported" for why, names in off.items()]
        temporality = environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().lower() or "delta"
        if temporality not in TEMPORALITIES:
            notes.append(f"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE={temporality} is not one of "
                         f"{', '.join(TEMPORALITIES)}; delta")
            temporality = "delta"
        scrape = ("", PROMETHEUS_PORT)
        if "metrics" in signals and signals["metrics"].exporter == "prometheus":
            try:
                scrape = _scrape(environ)
            except Bad as exc:
                notes.append(f"{exc}; metrics not exported")
                del signals["metrics"]
        resource = _resource(environ, notes) if signals else ()
        return cls(signals, temporality, _true(environ.get("OTEL_LOG_USER_PROMPTS")),
                   _true(environ.get("OTEL_LOG_TOOL_DETAILS")), terminal, tuple(dict.fromkeys(notes)), resource,
                   scrape)


def _signal(environ: Mapping[str, str], name: str, exporter: str, base_protocol: str, notes: list[str]) -> Signal:
    interval = _interval(environ, name, notes)
    queue, batch = DEFAULT_QUEUE, DEFAULT_BATCH
    if name in BATCH:
        queue = _number(environ, BATCH[name] + "MAX_QUEUE_SIZE", 1, QUEUE_MAX, DEFAULT_QUEUE)
        batch = _number(environ, BATCH[name] + "MAX_EXPORT_BATCH_SIZE", 1, QUEUE_MAX, DEFAULT_BATCH)
        timeout = _number(environ, BATCH[name] + "EXPORT_TIMEOUT", 1, MAX_MS, DEFAULT_EXPORT_TIMEOUT_MS)
        if batch > queue:
            raise Bad(f"{BATCH[name]}MAX_EXPORT_BATCH_SIZE={batch} is over {BATCH[name]}MAX_QUEUE_SIZE={queue}")
    else:
        timeout = _number(environ, "OTEL_METRIC_EXPORT_TIMEOUT", 1, MAX_MS, DEFAULT_EXPORT_TIMEOUT_MS)
    if exporter != "otlp":
        return Signal(exporter, "", interval, queue, batch, timeout)
    key = f"OTEL_EXPORTER_OTLP_{name.upper()}_PROTOCOL"
    if not (protocol := environ.get(key, "").strip()):
        key, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", base_protocol
    if protocol not in PROTOCOLS:
        raise Bad(f"{key}={protocol} is not supported ({', '.join(PROTOCOLS)})")
    try:
        otlp = read_otlp(environ, name, protocol)
    except ValueError as exc:
        raise Bad(str(exc)) from None
    notes += otlp.notes
    return Signal(exporter, protocol, interval, queue, batch, min(timeout, otlp.timeout_ms), otlp)


def _number(environ: Mapping[str, str], key: str, least: int, most: int, default: int) -> int:
    """A whole number the SDK reads, within what it can take (else Bad, naming it)."""
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Bad(f"{key}={raw} is not a whole number") from None
    if not least <= value <= most:
        raise Bad(f"{key}={raw} is not within {least}..{most}")
    return value


def _interval(environ: Mapping[str, str], name: str, notes: list[str]) -> int:
    raw = environ.get(INTERVAL[name], "").strip()
    if not raw:
        return DEFAULT_INTERVAL_MS[name]
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value > MAX_MS:
        raise Bad(f"{INTERVAL[name]}={raw} is past the longest interval a timer holds ({MAX_MS} ms)")
    if value > 0:
        return value
    notes.append(f"{INTERVAL[name]}={raw} is not a positive number of milliseconds; {DEFAULT_INTERVAL_MS[name]}")
    return DEFAULT_INTERVAL_MS[name]


def _resource(environ: Mapping[str, str], notes: list[str]) -> tuple[tuple[str, str], ...]:
    """OTEL_RESOURCE_ATTRIBUTES (`k=v,...`, values percent-decoded) and OTEL_SERVICE_NAME over it;
    a malformed list is one note naming it, and none of it is used (the SDK would warn per entry)."""
    from urllib.parse import unquote

    found: dict[str, str] = {}
    for _, entry, pair in pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", "")):
        if pair is None:
            notes.append(f"OTEL_RESOURCE_ATTRIBUTES has {entry!r}, not key=value; its attributes not used")
            found = {}
            break
        found[pair[0]] = unquote(pair[1])
    if service := environ.get("OTEL_SERVICE_NAME", "").strip():
        found["service.name"] = service
    return tuple(found.items())


def _scrape(environ: Mapping[str, str]) -> tuple[str, int]:
    host = environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "").strip()
    raw = environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", "").strip()
    if not raw:
        return host, PROMETHEUS_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise Bad(f"OTEL_EXPORTER_PROMETHEUS_PORT={raw} is not a port")
    return host, int(raw)
