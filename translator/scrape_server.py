"""The HTTP server both metrics endpoints run on (`--metrics`, shell/metrics.py; the
`OTEL_METRICS_EXPORTER=prometheus` endpoint, telemetry/prometheus.py), so that neither can be
held by its scrapers: each connection on a thread, at most MAX_SCRAPES at once, one over it
answered 503 at once and given no thread; a connection quiet CONNECTION_TIMEOUT_S closed (a
half-sent request or an answer left unread held a thread for ever); a burst queued in the listen
backlog. Standard library only: telemetry and the shells both import it.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import TYPE_CHECKING, Any

CONNECTION_TIMEOUT_S = 5.0  # a scrape's connection quiet this long is closed (it holds a thread)
BACKLOG = 1024  # connections waiting to be accepted (socketserver's 5 dropped a burst of 200 scrapes)
# Connections served at once, each on a thread (far above any real set of scrapers: a burst of 200
# is served); one over it is answered 503 at once and closed, never given a thread of its own.
MAX_SCRAPES = 256
_BUSY_BODY = b"busy: too many connections to the metrics server\n"
BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


class Capped(socketserver.ThreadingMixIn):
    """A threading server's mixin (first among its bases, before the HTTP server's class):
    at most MAX_SCRAPES connections served at once, each with a timeout on every read and write.
    One over the cap is answered 503 at once rather than made to wait: a scraper never retries
    within a scrape and counts any failure alike, so a wait would only add a flood's delay to
    every connection queued behind it (a real scraper's too) and keep the backlog full (a connect
    then times out, the scrape's whole timeout lost); a 503 drains the backlog at accept speed and
    names the cause on the target's page."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.slots = threading.BoundedSemaphore(MAX_SCRAPES)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            busy(request)
            self.shutdown_request(request)
            return
        request.settimeout(CONNECTION_TIMEOUT_S)  # whatever the handler: an idle connection is closed
        try:
            super().process_request(request, client_address)  # (its thread releases the slot)
        except BaseException:
            self.slots.release()  # no thread could be started
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    if TYPE_CHECKING:  # the server class's, beside the mixin

        def shutdown_request(self, request: Any) -> None: ...

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (timed out, its client gone) ends, unsaid: socketserver
        printed a traceback on stderr for each."""


def busy(request: socket.socket) -> None:
    """The 503 of a connection over the cap, written without waiting (it fits in any socket's
    buffer; a client that cannot take it gets the close alone). The request read so far is read
    first: a socket closed with bytes unread is reset, which can lose the answer."""
    with contextlib.suppress(OSError):
        request.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # (nothing sent yet)
            request.recv(65536)
        request.send(BUSY)


class Serving:
    """A server serving on a daemon thread of its own, from when it is made."""

    def __init__(self, server: socketserver.TCPServer, name: str) -> None:
        self.server = server
        self.port: int = server.server_address[1]
        self.thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving, without waiting up to half a second for the server thread to notice
        (a daemon: the process may exit at once)."""

        def stop() -> None:
            self.server.shutdown()
            self.server.server_close()

        threading.Thread(target=stop, name=f"{self.thread.name}-stop", daemon=True).start()
