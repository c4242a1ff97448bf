"""Claude Code's telemetry switches, read from the environment (no SDK needed to read them).

The exporters read their own standard variables (OTEL_EXPORTER_OTLP_ENDPOINT and the
per-signal endpoints, headers, timeouts, certificates; OTEL_RESOURCE_ATTRIBUTES and
OTEL_SERVICE_NAME); what is read here is what Claude Code decides itself: which signals go
where, the protocol, the intervals, the temporality (DELTA unless told), and what text may
leave the machine.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

SIGNALS = ("metrics", "logs", "traces")
PROTOCOLS = ("http/protobuf", "http/json")
EXPORTERS = ("otlp", "console")  # `none` (or unset) exports nothing, as in Claude Code
TEMPORALITIES = ("delta", "cumulative", "lowmemory")
BETA = "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA"
# Claude Code's intervals when none is set (ms): metrics a minute, logs and traces 5 s.
DEFAULT_INTERVAL_MS = {"metrics": 60_000, "logs": 5_000, "traces": 5_000}
INTERVAL = {"metrics": "OTEL_METRIC_EXPORT_INTERVAL", "logs": "OTEL_LOGS_EXPORT_INTERVAL",
            "traces": "OTEL_TRACES_EXPORT_INTERVAL"}


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


class Signal(msgspec.Struct, frozen=True):
    """Where one signal goes: `otlp` (with its protocol) or `console` (stderr: stdout is data)."""

    exporter: str
    protocol: str
    interval_ms: int


class Settings(msgspec.Struct, frozen=True):
    signals: dict[str, Signal]
    temporality: str  # delta | cumulative | lowmemory
    log_prompts: bool  # OTEL_LOG_USER_PROMPTS: prompt and response text, else "<REDACTED>"
    tool_details: bool  # OTEL_LOG_TOOL_DETAILS: tool_parameters and tool_input
    terminal: str  # terminal.type
    notes: tuple[str, ...] = ()  # what was asked and cannot be done, said once at start

    @property
    def exports_anything(self) -> bool:
        return bool(self.signals)

    @classmethod
    def read(cls, environ: Mapping[str, str], terminal: str = "non-interactive") -> Settings:
        notes: list[str] = []
        signals: dict[str, Signal] = {}
        base_protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf"
        for name in SIGNALS:
            if name == "traces" and not _true(environ.get(BETA)):
                continue  # Claude Code sends spans only with the beta flag
            asked = [e.strip() for e in environ.get(f"OTEL_{name.upper()}_EXPORTER", "").split(",") if e.strip()]
            exporter = next((e for e in asked if e in EXPORTERS), None)
            notes += [f"OTEL_{name.upper()}_EXPORTER={e} is not supported (otlp, console, none)"
                      for e in asked if e not in (*EXPORTERS, "none")]
            if exporter is None:
                continue
            protocol = environ.get(f"OTEL_EXPORTER_OTLP_{name.upper()}_PROTOCOL", "").strip() or base_protocol
            if protocol not in PROTOCOLS:
                notes.append(f"{name}: protocol {protocol} is not supported (http/protobuf, http/json); not exported")
                continue
            signals[name] = Signal(exporter, protocol, _interval(environ, name, notes))
        temporality = environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().lower() or "delta"
        if temporality not in TEMPORALITIES:
            notes.append(f"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE={temporality} is not one of "
                         f"{', '.join(TEMPORALITIES)}; delta")
            temporality = "delta"
        return cls(signals, temporality, _true(environ.get("OTEL_LOG_USER_PROMPTS")),
                   _true(environ.get("OTEL_LOG_TOOL_DETAILS")), terminal, tuple(notes))


def _interval(environ: Mapping[str, str], name: str, notes: list[str]) -> int:
    raw = environ.get(INTERVAL[name], "").strip()
    if not raw:
        return DEFAULT_INTERVAL_MS[name]
    try:
        value = int(raw)
        if value > 0:
            return value
    except ValueError:
        pass
    notes.append(f"{INTERVAL[name]}={raw} is not a positive number of milliseconds; {DEFAULT_INTERVAL_MS[name]}")
    return DEFAULT_INTERVAL_MS[name]
