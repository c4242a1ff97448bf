"""What Claude Code's OpenTelemetry export costs (`make bench`'s `--only telemetry`, and
`--telemetry` to run every figure of bench/run.py with it on): a file replay of the reference
stream with the telemetry off, then on (metrics; metrics and events; and spans too), exporting
over OTLP/HTTP protobuf to a loopback sink in this process that answers every POST at once,
commands alternated. Wall time of the whole command (its exit's last export included) and CPU
time of all its threads; the target is on the median wall time of metrics and events, the
export a dashboard of Claude Code's reads.

    python bench/telemetry.py [--mb 100] [--rounds 5]
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

TARGET = 1.10  # telemetry on / off, median wall time
SIGNALS = {
    "metrics": {"OTEL_METRICS_EXPORTER": "otlp"},
    "metrics+events": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp"},
    "+spans": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_TRACES_EXPORTER": "otlp",
               "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1"},
}


@contextmanager
def sink() -> Iterator[str]:
    """A collector that takes every POST and answers 200 at once; its endpoint."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
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


def overhead(translator: str, ref: Path, rounds: int) -> float:
    """Print the figures; the ratio the target is checked on."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    cmd = [translator, "--session-id", "S", str(ref)]
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    with sink() as endpoint:
        envs = {"off": base, **{name: base | telemetry_env(endpoint, name) for name in SIGNALS}}
        for _ in range(rounds):
            for name, env in envs.items():
                wall, cpu = run(cmd, env)
                walls.setdefault(name, []).append(wall)
                cpus.setdefault(name, []).append(cpu)
    size = ref.stat().st_size / 1e6
    off_wall, off_cpu = statistics.median(walls["off"]), statistics.median(cpus["off"])
    print(f"\ntelemetry off vs on, file replay of {size:.0f} MB, {rounds} alternated rounds (medians; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    for name in envs:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"  {name:15s} wall {wall:6.2f} s ({wall / off_wall:5.2f}x)   CPU {cpu:6.2f} s ({cpu / off_cpu:5.2f}x)")
    return statistics.median(walls["metrics+events"]) / off_wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.gen import generate

    here = Path(__file__).resolve().parent
    ref = here / "out" / f"ref-{args.mb:g}mb.ndjson"
    if not ref.exists():
        ref.parent.mkdir(exist_ok=True)
        generate(str(ref), args.mb)
    ratio = overhead(str(Path(sys.executable).parent / "translator"), ref, args.rounds)
    print(f"  metrics+events / off: {ratio:.2f}x the wall time (target <= {TARGET:.2f}x)   "
          f"{'met' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
