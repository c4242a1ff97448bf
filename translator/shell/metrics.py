"""`--metrics ADDRESS`: Prometheus metrics at /metrics and a health probe at /healthz, for a
sidecar or service that nobody watches by hand.

The shells feed it once per chunk read and once per stream, never per line, from what the core
counts anyway (lines, frames, the diagnostics — bad lines and recovery notices — and closed runs
it hands out), into plain counts.
A scrape turns them into prometheus_client metric families (a custom collector) and the library
writes the exposition. The HTTP server is prometheus_client's WSGI app behind a small wrapper
that adds /healthz, on the scrape server (translator/scrape_server.py: its connections capped,
an idle one closed) in a thread of its own: a scrape never waits for the anyio loop and the loop
never waits for a scrape. prometheus_client is imported only when this module is, i.e. only
with --metrics.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import anyio
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from translator.core.states import TRANSITIONS
from translator.diagnostics import KINDS, Diagnostic, Notice
from translator.diagnostics import stderr as _stderr
from translator.encoders import RunSummary
from translator.encoders.observed import Quiet
from translator.scrape_server import Capped, Serving
from translator.version import __version__

if TYPE_CHECKING:
    from translator.core.translator import Translator

SUBTYPES = ("success", "error", "max_tokens", "max_turns", "cancelled", "budget_exceeded")
# The usage counted, as the agent reports it (its input_tokens includes both cache counters).
TOKEN_KINDS = ("input", "output", "cache_read", "cache_creation")
# The fold's recovery moves, by kind (lost_run_end, retried_turn, truncated), read off its table.
RECOVERIES = tuple(sorted({to.recovery.kind for row in TRANSITIONS.values() for to in row.values() if to.recovery}))
HEARTBEAT_S = 1.0
STALE_S = 10.0  # the loop counts as stuck when its heartbeat is older than this


def _labelled(name: str, documentation: str, label: str, values: dict[str, int] | dict[str, float]) -> Metric:
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, value in dict(values).items():
        family.add_metric([key], value)
    return family


class Counted(Quiet):
    """One stream's closed runs, counted into the metrics as they close (through the watch, as
    every watcher: the core hands nothing out for it). It takes their results alone (the run's
    model is its summary's), so no tee stands in the encoder's path for the rest."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def run_end(self, run: RunSummary, t: float) -> None:
        self.metrics.count_run(run, run.model)


def parse_address(address: str) -> tuple[str, int]:
    """`tcp:[HOST:]PORT` (HOST defaults to 127.0.0.1; `[::1]` for IPv6) to (host, port)."""
    kind, _, where = address.partition(":")
    host, _, port = where.rpartition(":")
    if kind != "tcp" or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics {address}: expected tcp:[HOST:]PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class Metrics:
    """Plain counts the shells add to (an integer addition costs far less than a
    prometheus_client Counter's lock and label lookup), turned into metric families at each
    scrape by `collect`; `health` says whether the input is being read."""

    @classmethod
    def serve(
        cls, address: str, mode: str, follow_path: str | None, limit: int,
        reading: Callable[[], bool], stopping: Callable[[], bool],
    ) -> Metrics:
        """Metrics for a shell's `mode`, served at `address` from now on (OSError, ValueError:
        it cannot be); `reading` and `stopping` ask the shell whether it reads its input and
        whether a signal has come."""
        metrics = cls(mode, follow_path)
        metrics.limit = limit
        metrics.reading, metrics.stopping = reading, stopping
        host, port = parse_address(address)
        metrics.server = Server(metrics.app(), host, port)
        where = f"[{host}]" if ":" in host else host
        _stderr([f"translator: metrics on http://{where}:{metrics.server.port}/metrics, health on /healthz"], "info")
        return metrics

    def __init__(self, mode: str, follow_path: str | None = None) -> None:
        self.mode = mode
        self.lines = self.bytes = self.frames = self.open_runs = 0
        self.bad = dict.fromkeys(KINDS, 0)
        self.recoveries = dict.fromkeys(RECOVERIES, 0)
        self.runs = dict.fromkeys((*SUBTYPES, "other"), 0)
        self.tokens = dict.fromkeys(TOKEN_KINDS, 0)
        self.cost: dict[str, float] = {}
        self.restarts = {"truncated": 0, "replaced": 0}  # --follow
        self.active = self.accepted = self.timed_out = 0  # --listen
        self.limit = 0  # --max-connections
        self.beat = time.monotonic()
        self.last_input = self.beat
        self.reading: Callable[[], bool] = lambda: True  # whether the shell is reading its input
        self.stopping: Callable[[], bool] = lambda: False  # whether a signal has come
        self.server: Server | None = None
        self._streams: dict[Translator, list[int]] = {}  # core -> [lines, frames counted; run open]
        self.follow_path = follow_path
        self.follow_offset = 0
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.registry.register(self)

    # ------------------------------------------------------------------ fed by the shells

    def read(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.last_input = time.monotonic()

    def update(self, core: Translator, diags: Iterable[str]) -> None:
        """After a chunk: what the core read, rejected, closed and wrote."""
        seen = self._streams.get(core)
        if seen is None:
            seen = self._streams[core] = [0, 0, 0]
        self.lines += core.line_no - seen[0]
        self.frames += core.frames_written - seen[1]
        seen[0], seen[1] = core.line_no, core.frames_written
        for diag in diags:
            if isinstance(diag, Diagnostic):
                self.bad[diag.kind] += 1
            elif isinstance(diag, Notice):  # what the core said of a recovery move
                self.recoveries[diag.kind] += 1
        now_open = int(core.run_open)
        if now_open != seen[2]:
            self.open_runs += now_open - seen[2]
            seen[2] = now_open
        if core.stopped:
            self.forget(core)

    def count_run(self, run: RunSummary, model: str | None) -> None:
        """A closed run (its last turn's model): told by the stream's observer (Counted)."""
        runs, tokens, cost = self.runs, self.tokens, self.cost
        subtype = run.subtype if run.subtype in runs else "other"
        runs[subtype] += 1
        usage = run.usage
        tokens["input"] += usage.get("input_tokens", 0)
        tokens["output"] += usage.get("output_tokens", 0)
        tokens["cache_read"] += usage.get("cache_read_input_tokens", 0)
        tokens["cache_creation"] += usage.get("cache_creation_input_tokens", 0)
        model = model or "unknown"
        cost[model] = cost.get(model, 0.0) + run.cost_usd

    def observer(self) -> Counted:
        """A stream's observer, counting its closed runs here."""
        return Counted(self)

    def restarted(self, cause: str) -> None:
        """The followed file was truncated or replaced: a new stream begins."""
        self.restarts[cause] += 1
        self.follow_offset = 0

    def forget(self, core: Translator) -> None:
        """A stream is over (or abandoned, a client gone): its open run no longer counts."""
        seen = self._streams.pop(core, None)
        if seen is not None and seen[2]:
            self.open_runs -= 1

    # ------------------------------------------------------------------ scraped

    def collect(self) -> Iterator[Metric]:
        """The metric families, from the counts as they are now (called by the HTTP thread;
        dicts are copied first, a copy being atomic where iterating is not)."""
        yield InfoMetricFamily(
            "translator_build", "Version of the translator and of Python, and the mode it runs in",
            value={"version": __version__, "python": platform.python_version(), "mode": self.mode},
        )
        yield CounterMetricFamily("translator_input_lines", "Input lines read", value=self.lines)
        yield CounterMetricFamily("translator_input_bytes", "Input bytes read", value=self.bytes)
        yield _labelled("translator_bad_lines", "Input lines rejected, by reason", "reason", self.bad)
        yield _labelled("translator_runs_closed", "Runs closed (result frames written), by subtype", "subtype", self.runs)
        yield _labelled("translator_recoveries", "Recovery moves of the fold (a lost RunEnd, an input cut off inside "
                        "a run, a retried turn), by kind", "kind", self.recoveries)
        yield GaugeMetricFamily("translator_open_runs", "Runs begun and not closed yet", value=self.open_runs)
        yield _labelled("translator_tokens", "Tokens of closed runs, by kind", "kind", self.tokens)
        yield _labelled("translator_cost_usd", "Cost of closed runs in USD, by model", "model", self.cost)
        yield CounterMetricFamily("translator_frames_written", "Output frames written", value=self.frames)
        if self.follow_path is not None:
            yield GaugeMetricFamily("translator_follow_lag_bytes", "Bytes of the followed file not read yet",
                                    value=self._lag_bytes())
            yield GaugeMetricFamily("translator_follow_lag_seconds", "Seconds since input was last read",
                                    value=time.monotonic() - self.last_input)
            yield _labelled("translator_follow_restarts", "New streams because the followed file was truncated "
                            "or replaced", "cause", self.restarts)
        if self.mode == "service":
            yield GaugeMetricFamily("translator_connections_active", "Connections being served", value=self.active)
            yield CounterMetricFamily("translator_connections_accepted", "Connections accepted", value=self.accepted)
            yield GaugeMetricFamily("translator_connections_limit", "Connections served at once at most "
                                    "(--max-connections); the next wait in the listen backlog", value=self.limit)
            yield CounterMetricFamily("translator_connections_timed_out", "Connections closed for a timeout (quiet, "
                                      "a line unfinished, output unread)", value=self.timed_out)

    def _lag_bytes(self) -> float:
        try:
            return max(0, os.stat(self.follow_path or "").st_size - self.follow_offset)
        except OSError:
            return 0

    # ------------------------------------------------------------------ health

    async def heartbeat(self) -> None:
        """Proves to /healthz that the loop runs."""
        while True:
            self.beat = time.monotonic()
            await anyio.sleep(HEARTBEAT_S)

    def health(self) -> str | None:
        """None when healthy; otherwise why not."""
        stuck = time.monotonic() - self.beat
        if stuck > STALE_S:
            return f"the event loop has not run for {stuck:.0f} s"
        if self.stopping():
            return "stopping"
        if not self.reading():
            return "not reading its input"
        path = self.follow_path
        if path is not None:
            directory = os.path.dirname(os.path.abspath(path))
            if not os.access(directory, os.R_OK | os.X_OK):
                return f"{directory}: the followed file's directory is missing or unreadable"
            if os.path.exists(path) and not os.access(path, os.R_OK):
                return f"{path}: not readable"
        return None

    # ------------------------------------------------------------------ HTTP

    def app(self) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
        """/healthz here, /metrics prometheus_client's (compression, name[] filters), any other path 404
        (prometheus_client would answer it with the metrics, and a probe of a typo with 200)."""
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO")
            if path == "/metrics":
                return metrics(environ, start_response)  # type: ignore[no-any-return]
            if path == "/healthz":
                problem = self.health()
                status = "200 OK" if problem is None else "503 Service Unavailable"
                body = b"ok\n" if problem is None else f"unhealthy: {problem}\n".encode()
            else:
                status, body = "404 Not Found", b"not found: /metrics and /healthz are served\n"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
            return [body]

        return app

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a line on stderr."""


class _Server(Capped, WSGIServer):
    """A WSGI server capped as every scrape server is (translator/scrape_server.py)."""


class Server(Serving):
    """The WSGI app served at (host, port) on a daemon thread, its own address family's."""

    def __init__(self, app: Callable[..., Iterable[bytes]], host: str, port: int) -> None:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server_class = type("HTTPServer", (_Server,), {"address_family": family})
        super().__init__(make_server(host, port, app, server_class, _Quiet), "metrics")
