"""`OTEL_METRICS_EXPORTER=prometheus`: a scrape endpoint as Claude Code's (set-t5's
otel-prometheus): `*:9464` (the IPv6 wildcard, dual-stack) unless OTEL_EXPORTER_PROMETHEUS_HOST
and _PORT say, only `/metrics` (200, `text/plain`, `Connection: close`; any other path 404 with
no body), the metrics cumulative for the process, named and labelled as the CLI's: the OTel name
with `.` as `_` and `_total`, no unit suffix; the attributes as labels, then `otel_scope_name`
and `otel_scope_version`; `target_info` first with the resource.

The text is written here rather than by the SDK's Prometheus exporter, which adds the unit to
the name (`claude_code_cost_usage_USD_total`) where Claude Code's scrape does not.
"""

from __future__ import annotations

import re
import socket
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter, ObservableGauge, UpDownCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader, MetricsData, Sum

from translator.scrape_server import Capped, Serving

CUMULATIVE: dict[type, AggregationTemporality] = {
    kind: AggregationTemporality.CUMULATIVE for kind in (Counter, UpDownCounter, Histogram, ObservableCounter,
                                                         ObservableGauge)}
SCRAPE_S = 5.0  # the most one scrape's collection may take


def _name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", name)


def _value(value: float) -> str:
    """A number as JavaScript prints it (1, 0.005398), as the CLI's scrape shows it."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _labels(attributes: Any) -> str:
    def escape(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"  # (as JavaScript writes them)
        return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{re.sub(r"[^a-zA-Z0-9_]", "_", str(k))}="{escape(v)}"' for k, v in attributes.items())


def render(data: MetricsData | None) -> str:
    """The exposition text of what the meters hold: target_info, then each metric's points."""
    if data is None:
        return ""
    lines: list[str] = []
    for rm in data.resource_metrics:
        lines += ["# HELP target_info Target metadata", "# TYPE target_info gauge",
                  f"target_info{{{_labels(dict(rm.resource.attributes))}}} 1"]
        for sm in rm.scope_metrics:
            scope = {"otel_scope_name": sm.scope.name, "otel_scope_version": sm.scope.version or ""}
            for metric in sm.metrics:
                counter = isinstance(metric.data, Sum) and metric.data.is_monotonic
                name = _name(metric.name)
                name += "_total" if counter and not name.endswith("_total") else ""
                lines += [f"# HELP {name} {metric.description}", f"# TYPE {name} {'counter' if counter else 'gauge'}"]
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is not None:
                        lines.append(f"{name}{{{_labels({**dict(point.attributes or {}), **scope})}}} {_value(value)}")
    return "\n".join(lines) + "\n" if lines else ""


class Endpoint:
    """The scrape endpoint and the reader it collects from, served on a daemon thread."""

    def __init__(self, host: str, port: int) -> None:
        self.reader = InMemoryMetricReader(preferred_temporality=CUMULATIVE)
        reader = self.reader

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass  # (stderr is the run's)

            def do_GET(self) -> None:
                body = render(reader.get_metrics_data()).encode() if self.path == "/metrics" else b""
                self.send_response_only(200 if self.path == "/metrics" else 404)
                if self.path == "/metrics":
                    self.send_header("content-type", "text/plain")
                self.send_header("Date", self.date_time_string())
                self.send_header("Connection", "close")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

        self.serving = Serving(_server(host, port, Handler), "telemetry-prometheus")

    def close(self) -> None:
        self.serving.close()


def _server(host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> HTTPServer:
    """Bound as Claude Code binds: the host given, else the IPv6 wildcard taking IPv4 too (else
    IPv4's, on a machine without IPv6); capped as every scrape server is (scrape_server.py)."""
    family = socket.AF_INET6 if (":" in host or (not host and socket.has_ipv6)) else socket.AF_INET

    class Server(Capped, HTTPServer):
        address_family = family

        def server_bind(self) -> None:
            if family == socket.AF_INET6 and not host:
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    try:
        return Server((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port), handler)
    except OSError:
        if host or family != socket.AF_INET6:
            raise
        return _server("0.0.0.0", port, handler)  # (the wildcard, IPv4 only here)
