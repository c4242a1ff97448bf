"""The bytes between the shim and its app, under the one `Channel`, as claude-agent-sdk's
`Transport` is under its `Query`: stdio for the app that spawned `caliban-claude`, and an app in
this process for tests (`Memory`, as httpcore's mock stream), so that the session, the channel,
the permissions and the relay are driven without a process each."""

from __future__ import annotations

import os
import select
import threading
from typing import Protocol

from translator.core.feed import CHUNK


class Transport(Protocol):
    def read(self) -> bytes:
        """The app's next bytes, waiting for them; b"" once its input has ended."""

    def write(self, data: bytes | memoryview) -> int:
        """Write some of `data` to the app: how much (OSError: it cannot be written)."""

    def gone(self) -> bool:
        """Whether the app has stopped reading (nobody would see what is written now)."""


class Stdio:
    """fd 0 and fd 1; the app's leaving seen as POLLERR on stdout once it closes its end."""

    def __init__(self) -> None:
        self._stdout = select.poll()
        self._stdout.register(1, 0)  # its errors only

    def read(self) -> bytes:
        try:
            return os.read(0, CHUNK)
        except OSError:
            return b""

    def write(self, data: bytes | memoryview) -> int:
        return os.write(1, data)

    def gone(self) -> bool:
        return bool(self._stdout.poll(0))


class Memory:
    """An app in this process: what it `send`s is the shim's input (`end` ends it), and each
    line the shim writes is taken with `line`, in order."""

    def __init__(self) -> None:
        self._input: list[bytes] = []
        self._output = bytearray()
        self._changed = threading.Condition()
        self._ended = False
        self.left = False  # the app stopped reading: writes fail as a closed pipe's do

    # ------------------------------------------------------------------ the app's side

    def send(self, data: bytes) -> None:
        if not data:  # (an empty read is the input's end: only `end` says that)
            return
        with self._changed:
            self._input.append(data)
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def line(self, timeout: float = 10.0) -> bytes:
        """The next line the shim wrote, waiting up to `timeout` s for it (TimeoutError)."""
        with self._changed:
            if not self._changed.wait_for(lambda: b"\n" in self._output, timeout):
                raise TimeoutError(f"no line from the shim within {timeout:g} s: {bytes(self._output)[:200]!r}")
            cut = self._output.index(b"\n") + 1
            taken = bytes(self._output[:cut])
            del self._output[:cut]
            return taken

    def left_over(self) -> bytes:
        """What the shim wrote after its last newline (its output's end, once it has ended)."""
        with self._changed:
            taken = bytes(self._output)
            self._output.clear()
            return taken

    # ------------------------------------------------------------------ the shim's side

    def read(self) -> bytes:
        with self._changed:
            self._changed.wait_for(lambda: self._input or self._ended)
            return self._input.pop(0) if self._input else b""

    def write(self, data: bytes | memoryview) -> int:
        if self.left:
            raise BrokenPipeError(32, "Broken pipe")
        with self._changed:
            self._output += data
            self._changed.notify_all()
        return len(data)

    def gone(self) -> bool:
        return self.left
