"""What Claude Code's OpenTelemetry export costs (`make bench`'s `--only telemetry`, and
`--telemetry` to run every figure of bench/run.py with it on), against the brief's budget:
frames never wait for it, metrics <= 1.10x plus the SDK's import, events priced per record.

A file replay of the reference stream with the telemetry off, then on (metrics; metrics and
events; and spans too), exporting over OTLP/HTTP protobuf to a loopback sink in this process
that answers every POST at once and counts the records it is sent; commands alternated, each
also over an empty input. CPU time of the command (user + system of all its threads, from
wait4: on a shared machine it varies far less than wall time), the least of the rounds (other
processes only ever add to it; medians shown too):

- the import: a setting's CPU on the empty input less off's on it (the SDK, its exporters and
  providers, made once whatever the input);
- metrics: on the stream, less that import, against off (target METRICS);
- events: what metrics and events cost beyond metrics alone (less the difference of their
  imports), per log record the sink received (target EVENT_US); spans likewise, per span
  beyond events (printed, no target: Claude Code sends them only under a beta flag).

Exits 1 when a target is missed (or the sink got none of a setting's records).

    python bench/telemetry.py [--mb 100] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

METRICS = 1.10  # metrics on, less the SDK's import, / off: CPU time
EVENT_US = 120.0  # CPU per log record exported (the SDK's record, batch queue and protobuf encoding)
ROUNDS = 7  # at least: the least of a few rounds is still noise on a loaded machine
SIGNALS = {
    "metrics": {"OTEL_METRICS_EXPORTER": "otlp"},
    "metrics+events": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp"},
    "+spans": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_TRACES_EXPORTER": "otlp",
               "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1"},
}
RECORDS = {"/v1/metrics": "data points", "/v1/logs": "log records", "/v1/traces": "spans"}


class Received:
    """What the sink was sent since the last `take`: records by OTLP path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def add(self, path: str, body: bytes) -> None:
        n = _records(path, body)
        with self.lock:
            self.counts[path] = self.counts.get(path, 0) + n

    def take(self) -> dict[str, int]:
        with self.lock:
            counts, self.counts = self.counts, {}
        return counts


def _records(path: str, body: bytes) -> int:
    """The records of one OTLP/HTTP protobuf request (opentelemetry-proto, the exporters' own)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    if path == "/v1/logs":
        logs = ExportLogsServiceRequest.FromString(body)
        return sum(len(s.log_records) for r in logs.resource_logs for s in r.scope_logs)
    if path == "/v1/traces":
        traces = ExportTraceServiceRequest.FromString(body)
        return sum(len(s.spans) for r in traces.resource_spans for s in r.scope_spans)
    metrics = ExportMetricsServiceRequest.FromString(body)
    return sum(len(m.sum.data_points) for r in metrics.resource_metrics for s in r.scope_metrics for m in s.metrics)


@contextmanager
def sink(received: Received | None = None) -> Iterator[str]:
    """A collector that takes every POST, counts its records into `received` (if given) and
    answers 200; its endpoint. The count is made before the answer: once a command has exited,
    what it exported is counted."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if received is not None and self.path in RECORDS:
                received.add(self.path, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            # an exporter that exits before reading its answer closes the connection: no news
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def telemetry_env(endpoint: str, signals: str = "metrics+events") -> dict[str, str]:
    return {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", **SIGNALS[signals]}


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, all threads) of a command, output to /dev/null."""
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    began = time.monotonic()
    pid = os.posix_spawn(cmd[0], cmd, env, file_actions=devnull)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed with status {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def overhead(translator: str, ref: Path, rounds: int) -> list[str]:
    """Print the figures; the targets missed, each in a line."""
    rounds = max(rounds, ROUNDS)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    inputs = {"empty": os.devnull, "stream": str(ref)}
    cpus: dict[tuple[str, str], list[float]] = {}
    walls: dict[str, list[float]] = {}
    records: dict[str, dict[str, int]] = {}
    received = Received()
    with sink(received) as endpoint:
        envs = {"off": base, **{name: base | telemetry_env(endpoint, name) for name in SIGNALS}}
        for _ in range(rounds):
            for name, env in envs.items():
                for kind, path in inputs.items():
                    received.take()
                    wall, cpu = run([translator, "--session-id", "S", path], env)
                    cpus.setdefault((name, kind), []).append(cpu)
                    if kind == "stream":
                        walls.setdefault(name, []).append(wall)
                        records[name] = received.take()
    least = {key: min(v) for key, v in cpus.items()}
    imports = {name: least[name, "empty"] - least["off", "empty"] for name in envs}
    size = ref.stat().st_size / 1e6
    off = least["off", "stream"]
    print(f"\ntelemetry off vs on, file replay of {size:.0f} MB, {rounds} alternated rounds (least CPU of each; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    for name in envs:
        cpu, wall = least[name, "stream"], statistics.median(walls[name])
        got = ", ".join(f"{n:,} {RECORDS[p]}" for p, n in sorted(records[name].items())) or "nothing exported"
        print(f"  {name:15s} CPU {cpu:6.3f} s ({cpu / off:5.2f}x; median {statistics.median(cpus[name, 'stream']):6.3f} s)"
              f"  import {imports[name]:5.3f} s   wall {wall:6.2f} s (median)   {got}")
    missed: list[str] = []

    def check(ok: bool, what: str) -> str:
        if not ok:
            missed.append(what)
        return "met" if ok else "MISSED"

    for name, path in (("metrics", "/v1/metrics"), ("metrics+events", "/v1/logs"), ("+spans", "/v1/traces")):
        if not records[name].get(path):
            check(False, f"telemetry {name}: the sink received no {RECORDS[path]}")
    metrics = (least["metrics", "stream"] - imports["metrics"]) / off
    mark = check(metrics <= METRICS, f"telemetry metrics {metrics:.3f}x off's CPU less the import (target <= {METRICS})")
    print(f"  metrics less its import / off: {metrics:.3f}x the CPU time (target <= {METRICS:.2f}x)   {mark}"
          f"   (+{(least['metrics', 'stream'] - imports['metrics'] - off) * 1000:.0f} ms on this stream)")
    for name, below, path in (("metrics+events", "metrics", "/v1/logs"), ("+spans", "metrics+events", "/v1/traces")):
        count = records[name].get(path, 0)
        extra = (least[name, "stream"] - imports[name]) - (least[below, "stream"] - imports[below])
        us = extra / count * 1e6 if count else float("inf")
        if name == "metrics+events":
            mark = check(us <= EVENT_US, f"telemetry events {us:.0f} us of CPU per log record (target <= {EVENT_US:.0f})")
            print(f"  events: {us:6.1f} us of CPU per log record ({count:,}; target <= {EVENT_US:.0f} us)   {mark}")
        else:
            print(f"  spans:  {us:6.1f} us of CPU per span beyond the events ({count:,}; no target: a beta of Claude Code's)")
    return missed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.gen import generate

    here = Path(__file__).resolve().parent
    ref = here / "out" / f"ref-{args.mb:g}mb.ndjson"
    if not ref.exists():
        ref.parent.mkdir(exist_ok=True)
        generate(str(ref), args.mb)
    verdict(overhead(str(Path(sys.executable).parent / "translator"), ref, args.rounds))


def verdict(missed: list[str]) -> None:
    """The targets missed, each in a line, and exit 1; or that all were met."""
    if missed:
        print(f"\n{len(missed)} target(s) missed:")
        for what in missed:
            print(f"  - {what}")
        raise SystemExit(1)
    print("\nall targets met")


if __name__ == "__main__":
    main()
