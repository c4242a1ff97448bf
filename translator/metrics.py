"""`--metrics ADDRESS`: Prometheus metrics at /metrics and a health probe at /healthz, for a
sidecar or service that nobody watches by hand.

The shells feed it once per chunk read and once per stream, never per line, from what the core
counts anyway (lines, the diagnostics and closed runs it hands out). The HTTP server is
prometheus_client's WSGI app behind a small wrapper that adds /healthz, in a thread of its own:
a scrape never waits for the anyio loop and the loop never waits for a scrape. prometheus_client
is imported only when this module is, i.e. only with --metrics.
"""

from __future__ import annotations

import os
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Info, disable_created_metrics, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.process_collector import ProcessCollector

from translator import __version__
from translator.diagnostics import KINDS, Diagnostic
from translator.diagnostics import stderr as _stderr

if TYPE_CHECKING:
    from translator.fold import Translator
    from translator.pipeline import Shell

SUBTYPES = ("success", "error", "max_tokens", "max_turns", "cancelled", "budget_exceeded")
# The usage keys counted, as the agent reports them (its input_tokens includes both cache counters).
TOKEN_KINDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_creation",
}
HEARTBEAT_S = 1.0
STALE_S = 10.0  # the loop counts as stuck when its heartbeat is older than this


def parse_address(address: str) -> tuple[str, int]:
    """`tcp:[HOST:]PORT` (HOST defaults to 127.0.0.1; `[::1]` for IPv6) to (host, port)."""
    kind, _, where = address.partition(":")
    host, _, port = where.rpartition(":")
    if kind != "tcp" or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics {address}: expected tcp:[HOST:]PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class Metrics:
    """The registry and what feeds it; `health` says whether the input is being read."""

    @classmethod
    def serve(cls, shell: Shell, address: str) -> Metrics:
        """Metrics for this shell's mode, served at `address` from now on (OSError, ValueError:
        it cannot be)."""
        cfg = shell.cfg
        metrics = cls("follow" if cfg.follow else "service" if cfg.listen else "pipe", cfg.follow)
        metrics.reading = lambda: shell.read_scope is not None
        metrics.stopping = lambda: shell.outcome.signal is not None
        host, port = parse_address(address)
        metrics.server = Server(metrics.app(), host, port)
        where = f"[{host}]" if ":" in host else host
        _stderr([f"translator: metrics on http://{where}:{metrics.server.port}/metrics, health on /healthz"], "info")
        return metrics

    def __init__(self, mode: str, follow_path: str | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: noise
        self.registry = reg = CollectorRegistry()
        ProcessCollector(registry=reg)
        Info("translator_build", "Version of the translator and of Python", registry=reg).info(
            {"version": __version__, "python": platform.python_version(), "mode": mode}
        )
        self.lines = Counter("translator_input_lines", "Input lines read", registry=reg)
        self.bytes = Counter("translator_input_bytes", "Input bytes read", registry=reg)
        self.bad = Counter("translator_bad_lines", "Input lines rejected, by reason", ["reason"], registry=reg)
        self.runs = Counter("translator_runs_closed", "Runs closed (result frames), by subtype", ["subtype"], registry=reg)
        self.open_runs = Gauge("translator_open_runs", "Runs begun and not yet closed", registry=reg)
        self.tokens = Counter("translator_tokens", "Tokens of closed runs, by kind", ["kind"], registry=reg)
        self.cost = Counter("translator_cost_usd", "Cost of closed runs in USD, by model", ["model"], registry=reg)
        self.frames = Counter("translator_frames_written", "Output frames written", registry=reg)
        for kind in KINDS:
            self.bad.labels(kind)
        for subtype in (*SUBTYPES, "other"):
            self.runs.labels(subtype)
        for kind in TOKEN_KINDS.values():
            self.tokens.labels(kind)
        self.beat = time.monotonic()
        self.last_input = self.beat
        self.reading: Callable[[], bool] = lambda: True  # whether the shell is reading its input
        self.stopping: Callable[[], bool] = lambda: False  # whether a signal has come
        self.server: Server | None = None
        self._streams: dict[Translator, list[int]] = {}  # core -> [lines counted, run open]
        self.follow_path = follow_path
        self.follow_offset = 0
        if follow_path is not None:
            Gauge("translator_follow_lag_bytes", "Bytes of the followed file not read yet", registry=reg).set_function(
                self._lag_bytes
            )
            Gauge(
                "translator_follow_lag_seconds", "Seconds since input was last read from the followed file", registry=reg
            ).set_function(lambda: time.monotonic() - self.last_input)
            self.restarts = Counter(
                "translator_follow_restarts", "Streams restarted because the file was truncated or replaced", ["cause"],
                registry=reg,
            )
            for cause in ("truncated", "replaced"):
                self.restarts.labels(cause)
        if mode == "service":
            self.active = Gauge("translator_connections_active", "Connections being served", registry=reg)
            self.accepted = Counter("translator_connections_accepted", "Connections accepted", registry=reg)
            self.refused = Counter("translator_connections_refused", "Connections turned away", registry=reg)
            self.timed_out = Counter(
                "translator_connections_timed_out", "Connections closed by --idle-timeout", registry=reg
            )

    # ------------------------------------------------------------------ fed by the shells

    def read(self, nbytes: int) -> None:
        self.bytes.inc(nbytes)
        self.last_input = time.monotonic()

    def update(self, core: Translator, diags: Iterable[str], out: bytes) -> None:
        """After a chunk: what the core read, rejected, closed and wrote."""
        seen = self._streams.get(core)
        if seen is None:
            seen = self._streams[core] = [0, 0]
        self.lines.inc(core.line_no - seen[0])
        seen[0] = core.line_no
        for diag in diags:
            if isinstance(diag, Diagnostic):
                self.bad.labels(diag.kind).inc()
        if out:
            self.frames.inc(out.count(b"\n"))
        if core.closed:
            for run, model in core.closed:
                self.runs.labels(run.subtype if run.subtype in SUBTYPES else "other").inc()
                for key, kind in TOKEN_KINDS.items():
                    if value := run.usage.get(key):
                        self.tokens.labels(kind).inc(value)
                self.cost.labels(model or "unknown").inc(run.cost_usd)
            core.closed.clear()
        now_open = int(core.frame_open)
        if now_open != seen[1]:
            self.open_runs.inc(now_open - seen[1])
            seen[1] = now_open
        if core.stopped:
            self.forget(core)

    def restarted(self, cause: str) -> None:
        """The followed file was truncated or replaced: a new stream begins."""
        self.restarts.labels(cause).inc()
        self.follow_offset = 0

    def forget(self, core: Translator) -> None:
        """A stream is over (or abandoned, a client gone): its open run no longer counts."""
        seen = self._streams.pop(core, None)
        if seen is not None and seen[1]:
            self.open_runs.dec()

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

    def _lag_bytes(self) -> float:
        try:
            return max(0, os.stat(self.follow_path or "").st_size - self.follow_offset)
        except OSError:
            return 0

    # ------------------------------------------------------------------ HTTP

    def app(self) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
        """/healthz here, everything else prometheus_client's (/metrics, compression, HEAD...)."""
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != "/healthz":
                return metrics(environ, start_response)  # type: ignore[no-any-return]
            problem = self.health()
            body = b"ok\n" if problem is None else f"unhealthy: {problem}\n".encode()
            start_response("200 OK" if problem is None else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
            return [body]

        return app

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a line on stderr."""


class Server:
    """A threading WSGI server on its own daemon thread."""

    def __init__(self, app: Callable[..., Iterable[bytes]], host: str, port: int) -> None:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server_class = type("HTTPServer", (ThreadingWSGIServer,), {"address_family": family})
        self.httpd: WSGIServer = make_server(host, port, app, server_class, _Quiet)
        self.port: int = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
