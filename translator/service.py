"""`--listen`: a translation service. Each connection sends an event stream (raw or headless)
and gets its translation back on the same connection, the connection's own stream with the
command line's options.

Every connection has its own core, so one client's bad bytes, slowness or disconnect touch no
other. A slow reader is backpressure on its own stream only: nothing more is read from it while
its output waits. At most `max_connections` are served at once (the next ones wait in the
listen backlog); a connection quiet for `idle_timeout` is ended as an input that stopped. On
SIGTERM the service stops accepting, lets open connections finish their runs for `grace`
seconds, then closes what is left as cancelled.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteStream, Listener, TaskGroup

from translator.diagnostics import stderr as _stderr

if TYPE_CHECKING:
    from translator.pipeline import Shell

CHUNK = 1 << 16
FINAL_SEND_S = 5.0  # how long a closing connection may take to accept its last frames


async def open_listener(address: str) -> Listener[ByteStream]:
    """`unix:PATH`, or `tcp:[HOST:]PORT` (loopback unless a host is named)."""
    kind, _, where = address.partition(":")
    if kind == "unix" and where:
        try:
            if stat.S_ISSOCK(os.stat(where).st_mode):
                os.unlink(where)  # a socket left by an earlier run
        except FileNotFoundError:
            pass
        return await anyio.create_unix_listener(where)
    if kind == "tcp" and where:
        host, _, port = where.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        return await anyio.create_tcp_listener(local_host=host, local_port=int(port))
    raise ValueError(f"--listen {address!r}: expected unix:PATH or tcp:[HOST:]PORT")


class Service:
    def __init__(self, shell: Shell, max_connections: int, idle_timeout: float, grace: float) -> None:
        self.shell = shell
        self.slots = anyio.Semaphore(max_connections)
        self.idle_timeout = idle_timeout
        self.grace = grace
        self.open: set[anyio.CancelScope] = set()
        self.served = 0

    async def serve(self, listener: Listener[ByteStream], label: str) -> None:
        numbers = itertools.count(1)
        # a TCP listener may stand for several sockets (one per address of the host)
        sockets = getattr(listener, "listeners", [listener])
        async with anyio.create_task_group() as connections:
            with anyio.CancelScope() as accepting:
                self.shell.read_scope = accepting  # a signal ends the accepting
                async with anyio.create_task_group() as acceptors:
                    for sock in sockets:
                        acceptors.start_soon(self.accept, sock, connections, label, numbers)
            self.shell.read_scope = None
            await listener.aclose()
            deadline = anyio.current_time() + self.grace
            for scope in self.open:
                scope.deadline = deadline

    async def accept(
        self, sock: Listener[ByteStream], connections: TaskGroup, label: str, numbers: Iterator[int]
    ) -> None:
        while True:
            await self.slots.acquire()
            try:
                stream = await sock.accept()  # type: ignore[attr-defined]
            except BaseException:
                self.slots.release()
                raise
            if self.shell.metrics is not None:
                self.shell.metrics.accepted.inc()
            connections.start_soon(self.connection, stream, f"{label}#{next(numbers)}")

    async def connection(self, stream: ByteStream, label: str) -> None:
        core = self.shell.new_core(label, live=True)

        async def send(data: bytes) -> None:
            await stream.send(data)

        scope = anyio.CancelScope()
        metrics = self.shell.metrics
        if metrics is not None:
            metrics.active.inc()
        try:
            with scope:
                self.open.add(scope)
                while not core.stopped:
                    with anyio.move_on_after(self.idle_timeout) as idle:
                        try:
                            data = await stream.receive(CHUNK)
                        except anyio.EndOfStream:
                            data = b""
                    if idle.cancelled_caught:
                        _stderr([f"translator: {label}: nothing for {self.idle_timeout:g} s; closing"], "info")
                        if metrics is not None:
                            metrics.timed_out.inc()
                        break
                    if not data:
                        break
                    self.shell.feed(core, data)
                    await self.shell.emit(core, send)
            if scope.cancelled_caught:
                core.cancel(time.monotonic())  # the grace period after SIGTERM ran out
            else:
                core.end(time.monotonic())
            with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_SEND_S):
                await self.shell.emit(core, send)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away: its stream ends here, nobody else's
        except Exception as exc:  # the last resort: this connection ends, the service goes on
            _stderr([f"translator: {label}: internal error ({type(exc).__name__}: {exc}); connection closed"])
            core.end(time.monotonic())
        finally:
            if metrics is not None:
                metrics.active.dec()
                metrics.forget(core)
            self.open.discard(scope)
            self.served += 1
            self.slots.release()
            with anyio.CancelScope(shield=True):
                await stream.aclose()
