"""`--listen`: a translation service. Each connection sends an event stream (raw or headless)
and gets its translation back on the same connection, the connection's own stream with the
command line's options.

Every connection has its own core, so one client's bad bytes, slowness or disconnect touch no
other. A slow reader is backpressure on its own stream only: nothing more is read from it while
its output waits. At most `max_connections` are served at once (the next ones wait in the
listen backlog), and what they hold is bounded too: unfinished lines take at most
`max_pending_bytes` together. A slot is not held for nothing: a connection is closed when it is
quiet for `idle_timeout`, when it does not read its output for as long, or when a line it began
is not finished within `line_timeout` (a client dripping bytes); each close is said on stderr.
On SIGTERM the service stops accepting, lets open connections finish their runs for `grace`
seconds, then closes what is left as cancelled. A unix socket is created with `socket_mode`,
never taken from a live service, and removed on exit.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
import stat
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteStream, Listener, TaskGroup

from translator.core.feed import CHUNK
from translator.diagnostics import stderr as _stderr
from translator.shell.pump import Pump
from translator.shell.sink import SCARCE

if TYPE_CHECKING:
    from translator.core.translator import Translator
    from translator.shell.pump import Shell

FINAL_SEND_S = 5.0  # how long a closing connection may take to accept its last frames
FULL_NOTE_S = 60.0  # how often the service may say that all its connections are taken (or its fds)
SCARCE_RETRY_S = 0.5  # out of fds, how often an accept is tried again


class Stalled(Exception):
    """A connection is closed for holding its slot without progress; the message says how."""


async def open_listener(address: str, mode: int = 0o600) -> Listener[ByteStream]:
    """`unix:PATH` (created with `mode`), or `tcp:[HOST:]PORT` (loopback unless a host is named)."""
    kind, _, where = address.partition(":")
    if kind == "unix" and where:
        clear_stale_socket(where)
        umask = os.umask(0o777 & ~mode)  # the socket is born with its mode: no moment more open
        try:
            return await anyio.create_unix_listener(where)
        finally:
            os.umask(umask)
    if kind == "tcp" and where:
        host, _, port = where.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        return await anyio.create_tcp_listener(local_host=host, local_port=int(port))
    raise ValueError(f"--listen {address!r}: expected unix:PATH or tcp:[HOST:]PORT")


def clear_stale_socket(path: str) -> None:
    """Remove a socket an earlier run left at `path`; raise if a live service still holds it."""
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return  # not a socket: binding fails and says why
    except FileNotFoundError:
        return
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # nobody listens: left by a run that died
        return
    except OSError:
        pass  # a full backlog or a slow peer: someone is there
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, "a live service already listens on this socket")


class Service:
    def __init__(self, shell: Shell) -> None:
        cfg = shell.cfg
        self.shell = shell
        self.slots = anyio.Semaphore(cfg.max_connections)
        self.max_connections = cfg.max_connections
        self.idle_timeout = cfg.idle_timeout
        self.line_timeout = cfg.line_timeout
        self.grace = cfg.grace
        self.max_pending = cfg.max_pending_bytes
        self.pending = 0  # bytes of unfinished lines held for all connections
        self.open: set[anyio.CancelScope] = set()
        self.quiet_until = 0.0  # no note that all slots are taken before then
        self.scarce_until = 0.0  # nor that the fds have run out
        self.socket_file: tuple[str, int, int] | None = None  # a unix socket we created: path, dev, ino

    async def listen(self, address: str) -> Listener[ByteStream]:
        listener = await open_listener(address, self.shell.cfg.socket_mode)
        kind, _, where = address.partition(":")
        if kind == "unix":
            st = os.stat(where)
            self.socket_file = (where, st.st_dev, st.st_ino)
        elif where.rpartition(":")[2] == "0":  # the port the system chose: no client could find it unsaid
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            _stderr([f"translator: --listen {address}: listening on port {port}"], "info")
        return listener

    def remove_socket_file(self) -> None:
        """Remove our unix socket, unless another has taken its name since."""
        if self.socket_file is None:
            return
        path, dev, ino = self.socket_file
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if (st.st_dev, st.st_ino) == (dev, ino):
                os.unlink(path)

    async def serve(self, listener: Listener[ByteStream], label: str) -> None:
        numbers = itertools.count(1)
        # a TCP listener may stand for several sockets (one per address of the host)
        sockets = getattr(listener, "listeners", [listener])
        try:
            async with anyio.create_task_group() as connections:
                with anyio.CancelScope() as accepting:
                    self.shell.read_scope = accepting  # a signal ends the accepting
                    async with anyio.create_task_group() as acceptors:
                        for sock in sockets:
                            acceptors.start_soon(self.accept, sock, connections, label, numbers)
                self.shell.read_scope = None
                await listener.aclose()
                self.remove_socket_file()
                deadline = anyio.current_time() + self.grace
                for scope in self.open:
                    scope.deadline = deadline
        finally:
            self.remove_socket_file()

    async def accept(
        self, sock: Listener[ByteStream], connections: TaskGroup, label: str, numbers: Iterator[int]
    ) -> None:
        while True:
            if self.slots.value == 0 and anyio.current_time() >= self.quiet_until:
                # said once a minute at most: under a steady load every accept would say it
                self.quiet_until = anyio.current_time() + FULL_NOTE_S
                _stderr([f"translator: {label}: all {self.max_connections} connections are being served; "
                         "the next clients wait"], "info")
            await self.slots.acquire()
            try:
                stream = await sock.accept()  # type: ignore[attr-defined]
            except (OSError, anyio.BrokenResourceError) as exc:  # anyio's unix listener wraps the OSError
                self.slots.release()
                error = exc if isinstance(exc, OSError) else exc.__cause__
                if not isinstance(error, OSError) or error.errno not in SCARCE:
                    raise
                # out of fds: the client waits in the backlog until a connection ends and frees one
                if anyio.current_time() >= self.scarce_until:
                    self.scarce_until = anyio.current_time() + FULL_NOTE_S
                    _stderr([f"translator: {label}: cannot accept a connection: {error.strerror}; "
                             f"trying again every {SCARCE_RETRY_S:g} s"])
                await anyio.sleep(SCARCE_RETRY_S)
                continue
            except BaseException:
                self.slots.release()
                raise
            if self.shell.metrics is not None:
                self.shell.metrics.accepted += 1
            connections.start_soon(self.connection, stream, f"{label}#{next(numbers)}")

    async def connection(self, stream: ByteStream, label: str) -> None:
        core = self.shell.new_core(label, live=True)
        held = 0  # this connection's share of self.pending
        line_began: float | None = None  # when the unfinished line's first bytes came
        lines_before = 0

        async def send(data: bytes) -> None:
            """A send blocked as long as the idle timeout is a client that does not read."""
            with anyio.move_on_after(self.idle_timeout) as blocked:
                await stream.send(data)
            if blocked.cancelled_caught:
                raise Stalled(f"its output unread for {self.idle_timeout:g} s")

        pump = Pump(self.shell, core, send)  # a client may send its stream gzip- or zstd-compressed

        async def receive() -> bytes:
            """The next chunk; a client quiet for the idle timeout, or dripping a line for
            longer than the line timeout, is stalled."""
            nonlocal lines_before
            now = anyio.current_time()
            line_due = None if line_began is None else line_began + self.line_timeout
            with anyio.move_on_after(min(self.idle_timeout, (line_due or now + self.idle_timeout) - now)) as quiet:
                try:
                    data = await stream.receive(CHUNK)
                except anyio.EndOfStream:
                    data = b""
            if quiet.cancelled_caught:
                if line_due is not None and anyio.current_time() >= line_due:
                    raise Stalled(f"a line unfinished {self.line_timeout:g} s after it began")
                raise Stalled(f"nothing for {self.idle_timeout:g} s")
            lines_before = core.line_no
            return data

        def fed() -> None:
            """The line timer and the memory budget, after each chunk."""
            nonlocal line_began, held
            if core.pending_bytes and (line_began is None or core.line_no != lines_before):
                line_began = anyio.current_time()
            elif not core.pending_bytes:
                line_began = None
            held = self.hold(core, held)

        scope = anyio.CancelScope()
        metrics = self.shell.metrics
        if metrics is not None:
            metrics.active += 1
        try:
            with scope:
                self.open.add(scope)
                await pump.run(receive, fed)  # to the end, broken compressed data, or a stopped core
            with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_SEND_S):
                await pump.close(cancelled=scope.cancelled_caught)  # cancelled: the grace after SIGTERM ran out
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away: its stream ends here, nobody else's
        except Stalled as why:
            _stderr([f"translator: {label}: {why}; closing"], "info")
            if metrics is not None:
                metrics.timed_out += 1
            await self.last_words(core, send)
        except Exception as exc:  # the last resort: this connection ends, the service goes on
            _stderr([f"translator: {label}: internal error ({type(exc).__name__}: {exc}); closing"])
            await self.last_words(core, send)
        finally:
            self.pending -= held
            if metrics is not None:
                metrics.active -= 1
                metrics.forget(core)
            self.open.discard(scope)
            self.slots.release()
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    def hold(self, core: Translator, held: int) -> int:
        """Account a connection's unfinished line in the service's budget; a line that would
        pass the budget is skipped (reported, rejected), so the memory all connections hold
        stays bounded, not just their number. Returns the connection's new share."""
        self.pending += core.pending_bytes - held
        if self.pending > self.max_pending and core.pending_bytes:
            self.pending -= core.pending_bytes
            core.drop_line(
                f"line skipped: unfinished lines of all connections would hold more than {self.max_pending} "
                "bytes (--max-pending-bytes)"
            )
        return core.pending_bytes

    async def last_words(self, core: Translator, send: Callable[[bytes], Awaitable[None]]) -> None:
        """A connection closed by the service: its run still gets its result, if the client
        takes it within the final send's time (and whatever fails now ends only this)."""
        core.end(time.monotonic())
        with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_SEND_S), contextlib.suppress(Exception):
            await self.shell.emit(core, send)


async def listen(shell: Shell, address: str) -> None:
    """`--listen ADDRESS`: serve it until a signal; an address that cannot be served is said."""
    service = Service(shell)
    try:
        listener = await service.listen(address)
    except OSError as exc:
        _stderr([f"translator: --listen {address}: {exc.strerror or exc}"])
        shell.outcome.io_error = True
        return
    await service.serve(listener, address)
