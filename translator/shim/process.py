"""One caliban process: spawned for one user message, its prompt written to its stdin and
closed (caliban reads stdin to EOF before it runs), its stdout handed on as it arrives, its stderr forwarded to ours (the SDK passes it to `options.stderr`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO

from translator.feed import CHUNK

NOT_FOUND = 127  # the shell's status for a command it cannot find


class CalibanRun:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_tail = ""  # caliban's last stderr line, for a run that ends without a result
        self._lock = threading.Lock()
        self._done = False
        self._interrupted = False  # asked before caliban was started: it is signalled on start

    def run(self, prompt: str, on_output: Callable[[bytes], None]) -> int:
        """Run to the end, passing on stdout as it comes; the exit status."""
        try:
            with self._lock:
                # Its own process group: a terminal's Ctrl-C reaches the shim only, which passes
                # one SIGINT on (a second one would make caliban exit without saving).
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0,
                    bufsize=0,
                )  # fmt: skip
                if self._interrupted:
                    self.proc.send_signal(signal.SIGINT)
        except OSError as exc:
            self.stderr_tail = f"cannot run {self.argv[0]}: {exc.strerror or exc}"
            return NOT_FOUND
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        errors = threading.Thread(target=self._forward_stderr, args=(proc.stderr,), daemon=True)
        errors.start()
        try:
            proc.stdin.write(prompt.encode())
            proc.stdin.close()
        except OSError:  # it exited before reading its prompt (a usage error): its status says why
            pass
        while chunk := proc.stdout.read(CHUNK):  # whatever caliban has written, at once
            on_output(chunk)
        status = proc.wait()
        errors.join(timeout=2.0)
        with self._lock:
            self._done = True
        return status

    def signal(self, signum: int) -> None:
        """Signal caliban if it is still running (SIGINT: cancel, save and print a result)."""
        with self._lock:
            if self.proc is not None and not self._done and self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    self.proc.send_signal(signum)

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
        self.signal(signal.SIGINT)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def _forward_stderr(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            text = line.decode("utf-8", "replace").rstrip("\n")
            if text.strip():
                self.stderr_tail = text.strip()
            with contextlib.suppress(OSError, ValueError, AttributeError):  # (no sys.stderr: started without one)
                os.write(sys.stderr.fileno(), line if line.endswith(b"\n") else line + b"\n")
