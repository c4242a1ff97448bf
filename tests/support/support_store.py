"""An object store that fails as told: an HTTP proxy on 127.0.0.1 in front of a real S3 API
(moto's server), passing every request through but those a rule names, which get a 500, a body
cut in half, a body that stalls halfway, no answer at all, or a body never read; and the two ends a store can be
when nothing answers: a dead port (refused) and one whose listen queue is full (a connect that
never completes). Shared by the tests (pytest does not collect it: it holds no tests)."""

from __future__ import annotations

import http.client
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

Fault = Literal["500", "cut", "stall", "hang", "deaf"]
ERROR = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
         b"<Message>We encountered an internal error. Please try again.</Message></Error>")


@dataclass
class Rule:
    method: str
    contains: str  # a substring of the request's path (the bucket and key, URL-quoted)
    fault: Fault


class FaultyProxy:
    """`proxy.fail("GET", "logs/a.ndjson", "cut")`: every GET whose path holds the string from
    now on gets the fault; `proxy.seen` lists the requests (method, path) it was sent."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str]] = []
        self.released = threading.Event()  # set at stop: stalled and hung requests end
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, method: str, contains: str, fault: Fault) -> None:
        self.rules.append(Rule(method, contains, fault))

    def clear(self) -> None:
        self.rules.clear()
        self.seen.clear()

    def fault(self, method: str, path: str) -> Fault | None:
        self.seen.append((method, path))
        return next((r.fault for r in self.rules if r.method == method and r.contains in path), None)

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _handler(proxy: FaultyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive as S3's clients expect; 100-continue answered

        def log_message(self, format: str, *args: object) -> None:
            return None

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(parts)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _relay(self) -> None:
            fault = proxy.fault(self.command, self.path)
            if fault == "deaf":  # the body is never read: the client's write blocks once buffers fill
                proxy.released.wait(120)
                self.close_connection = True
                return
            body = self._body()
            if fault == "hang":
                proxy.released.wait(120)
                self.close_connection = True
                return
            if fault == "500":
                self._answer(500, [("Content-Type", "application/xml")], ERROR)
                return
            upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("expect", "transfer-encoding", "connection", "content-length")}
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            upstream.close()
            kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in ("transfer-encoding", "connection")
                    and (k.lower() != "content-length" or self.command == "HEAD")]
            if fault in ("cut", "stall") and len(data) > 1:
                self.send_response(answer.status)
                for k, v in [*kept, ("Content-Length", str(len(data)))]:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                if fault == "stall":
                    proxy.released.wait(120)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._answer(answer.status, kept, data)

        def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            sized = headers if self.command == "HEAD" else [*headers, ("Content-Length", str(len(data)))]
            for k, v in sized:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

    return Handler


def dead_port() -> int:
    """A port on 127.0.0.1 nobody listens on: a connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FullQueue:
    """A port that listens but never accepts, its queue filled: a new connection's SYN is
    dropped, so connecting hangs until the client's own connect timeout (an unreachable host,
    on loopback)."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = int(self.listener.getsockname()[1])
        self.fillers: list[socket.socket] = []
        for _ in range(4):  # the queue holds backlog + 1; a few more, non-blocking, to be sure
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self.fillers.append(s)

    def close(self) -> None:
        for s in [*self.fillers, self.listener]:
            s.close()
