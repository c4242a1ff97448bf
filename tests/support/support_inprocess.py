"""`caliban-claude` served in this process, for the Python Agent SDK: a real `Transport` of
claude_agent_sdk's (its public ABC, what `query(transport=)` and `ClaudeSDKClient(transport=)`
take) whose far end is the shim's session over protocol/transport.py's `Memory`, built by the
shim's one door (`translator.shim.main.serve`: argv, env, folder, transport) on a thread of its own.

What the SDK would hand a process it hands the session: the argv its own subprocess transport
builds from the options (`_build_command`, with `can_use_tool` routed to stdio as `query()` and
`connect()` route it), its environment merged as it merges it, `cwd`, and stderr's lines to
`options.stderr`. caliban is still a process (the fake, CALIBAN_BIN): what saves the time is the
shim's interpreter start and import, once per test file's worker instead of once per session.

The environment and the folder are the session's own (`serve` takes them; nothing below it reads
the process's), so sessions run side by side. `sys.stderr` is still the process's: a session
given `options.stderr` has it while it lives (one such session at a time in a process, as pytest
runs a worker's tests). An exit status other than 0 ends `read_messages` with the SDK's
`ProcessError`, as a process's.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import anyio
import claude_agent_sdk
import orjson
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, Message, ProcessError
from claude_agent_sdk import __version__ as SDK_VERSION
from claude_agent_sdk._internal.transport import Transport
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import _configure_can_use_tool

from translator.shim.main import serve
from translator.shim.protocol.transport import Memory

GRACE_S = 5.0  # as the SDK's close(): the input ended, then the app stops reading, then given up


class _Woken(Memory):
    """`Memory` that wakes the app's event loop on each write of the shim's (the shim's threads write)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self.wake = wake

    def write(self, data: bytes | memoryview) -> int:
        written = super().write(data)
        self.wake()
        return written


class _Piped(io.TextIOWrapper):
    """The write end of a session's stderr pipe (known by its type: one at a time)."""


class _Stderr:
    """A pipe for the session's stderr (sys.stderr on its write end: the shim writes its own lines
    and caliban's to the fd), each whole line handed to the app's `options.stderr` by a thread of
    its own, without its newline, as the SDK hands a process's."""

    def __init__(self, take: Callable[[str], None]) -> None:
        read, write = os.pipe()
        self.stream = _Piped(os.fdopen(write, "wb"), encoding="utf-8", errors="backslashreplace")
        self._reader = threading.Thread(target=self._lines, args=(read, take), name="stderr", daemon=True)
        self._reader.start()

    @staticmethod
    def _lines(fd: int, take: Callable[[str], None]) -> None:
        with os.fdopen(fd, "rb") as lines:
            for line in lines:
                take(line.decode("utf-8", "replace").rstrip("\n"))

    def close(self) -> None:
        self.stream.close()
        self._reader.join(GRACE_S)


def stderr_to(take: Callable[[str], None] | None) -> Callable[[], None]:
    """A session's stderr (each line to `take`) made the process's; what puts it back. One at
    a time: a second session's lines would go to the first's `take` (said, not mixed)."""
    if take is None:
        return lambda: None
    if isinstance(sys.stderr, _Piped):
        raise RuntimeError("a session in this process already has stderr: one with options.stderr at a time")
    stderr, piped = sys.stderr, _Stderr(take)
    sys.stderr = piped.stream

    def restore() -> None:
        sys.stderr = stderr
        piped.close()

    return restore


class Served:
    """caliban-claude in this process for an app that speaks to it as to a process: bytes in
    (`send`, then `end`, its stdin closed), its lines out (`line`, b"" once it has ended and
    nothing is left, as readline at EOF), its exit status (`wait`). `stderr`: each of its lines."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str],
                 stderr: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.memory = Memory()
        self.status: int | None = None
        self._restore = stderr_to(stderr)
        self._thread = threading.Thread(target=self._serve, args=(argv, env, str(cwd)), name="caliban-claude", daemon=True)
        self._thread.start()

    def _serve(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        try:
            self.status = serve(argv, env, cwd, self.memory)
        except BaseException:
            self.status = 70  # (what the command's traceback would exit with)
            raise
        finally:
            self._restore()  # (at its end, whether or not the test waits for it)

    def send(self, data: bytes) -> None:
        self.memory.send(data)

    def end(self) -> None:
        self.memory.end()

    def line(self, timeout: float = 20.0) -> bytes:
        """The next line it wrote, waiting up to `timeout` s; b"" once it has ended without one."""
        deadline = time.monotonic() + timeout
        while True:
            alive = self._thread.is_alive()
            try:
                return self.memory.line(timeout=0 if not alive else 0.05)
            except TimeoutError:
                if not alive:
                    return b""
                if time.monotonic() > deadline:
                    raise

    def rest(self, timeout: float = 20.0) -> list[bytes]:
        """Every line it writes from now to its end."""
        lines = []
        while line := self.line(timeout):
            lines.append(line)
        return lines

    def wait(self, timeout: float = 20.0) -> int:
        """Its exit status, once it has ended (TimeoutError: not within `timeout` s)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"caliban-claude still running after {timeout:g} s")
        assert self.status is not None
        return self.status


def printed(argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str], stdin: bytes = b"",
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`caliban-claude ARGV` (print mode, or anything that needs no app) run in this process as
    `subprocess.run(..., capture_output=True, text=True)` runs the command: `stdin` its input,
    its stdout, its stderr and its exit status."""
    said: list[str] = []
    served = Served(argv, env, cwd, said.append)
    served.send(stdin)
    served.end()
    out = b"".join(served.rest(timeout))
    status = served.wait(timeout)
    out += served.memory.left_over()  # (a last line without its newline)
    return subprocess.CompletedProcess(["caliban-claude", *argv], status, out.decode(), "".join(f"{s}\n" for s in said))


class InProcess(Transport):
    """The shim's session for one SDK client, in this process: `connect` starts it (argv, env,
    cwd and stderr as the SDK gives a process), `close` ends its input and waits for it."""

    def __init__(self, options: ClaudeAgentOptions, prompt: str | AsyncIterable[dict[str, Any]] = "") -> None:
        configured = _configure_can_use_tool(options)
        self.argv = SubprocessCLITransport(prompt=prompt, options=configured)._build_command()[1:]
        self.env = {k: v for k, v in os.environ.items() if k != "CLAUDECODE"}
        self.env |= {"CLAUDE_CODE_ENTRYPOINT": "sdk-py", **options.env, "CLAUDE_AGENT_SDK_VERSION": SDK_VERSION}
        self.env.setdefault("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1")  # (the SDK's own default for its CLI)
        self.cwd = str(options.cwd) if options.cwd else os.getcwd()  # (the SDK's child: the app's folder)
        self.env["PWD"] = self.cwd
        self.stderr = options.stderr
        self.status: int | None = None  # the session's exit status, once it has ended
        self._ended = asyncio.Event()
        self._woken = asyncio.Event()
        self._memory: _Woken | None = None
        self._thread: threading.Thread | None = None
        self._restore: Callable[[], None] = lambda: None

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        self._memory = memory = _Woken(lambda: loop.call_soon_threadsafe(self._woken.set))
        self._restore = self._enter()

        def session() -> None:
            try:
                self.status = serve(self.argv, self.env, self.cwd, memory)
            except BaseException:
                self.status = 70  # (what the command's traceback would exit with: not 0)
                raise
            finally:
                with contextlib.suppress(RuntimeError):  # (the loop closed: the app gave up on it)
                    loop.call_soon_threadsafe(self._end)

        self._thread = threading.Thread(target=session, name="caliban-claude", daemon=True)
        self._thread.start()

    def _end(self) -> None:
        self._ended.set()
        self._woken.set()

    def _enter(self) -> Callable[[], None]:
        return stderr_to(self.stderr)

    async def write(self, data: str) -> None:
        assert self._memory is not None, "not connected"
        self._memory.send(data.encode())

    async def end_input(self) -> None:
        if self._memory is not None:
            self._memory.end()

    def is_ready(self) -> bool:
        return self._memory is not None and not self._ended.is_set()

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[dict[str, Any]]:
        memory = self._memory
        assert memory is not None, "not connected"
        while True:
            self._woken.clear()
            try:
                line = memory.line(timeout=0)
            except TimeoutError:
                if self._ended.is_set():
                    break
                await self._woken.wait()
                continue
            yield orjson.loads(line)
        if self.status:
            raise ProcessError(f"Command failed with exit code {self.status}", exit_code=self.status,
                               stderr="Check stderr output for details")  # fmt: skip

    async def close(self) -> None:
        """As the SDK closes its process: the input ended, then (GRACE_S later) the app gone, then left."""
        if self._memory is None:
            return
        with anyio.CancelScope(shield=True):
            self._memory.end()
            with anyio.move_on_after(GRACE_S):
                await self._ended.wait()
            if not self._ended.is_set():
                self._memory.left = True  # the session stops as when its app stops reading (caliban killed)
                with anyio.move_on_after(GRACE_S):
                    await self._ended.wait()
            self._restore()
            self._restore = lambda: None


def queried(prompt: str | AsyncIterable[dict[str, Any]], options: ClaudeAgentOptions) -> AsyncIterator[Message]:
    """`query()` with the session in this process (looked up at the call: an instrumentation's, once it wraps it)."""
    return claude_agent_sdk.query(prompt=prompt, options=options, transport=InProcess(options, prompt))


def in_process(options: ClaudeAgentOptions) -> ClaudeSDKClient:
    """`ClaudeSDKClient` with the session in this process (looked up at the call, as `queried`'s)."""
    client: ClaudeSDKClient = claude_agent_sdk.ClaudeSDKClient(options, transport=InProcess(options))
    return client
