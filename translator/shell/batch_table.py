"""`--results-table`'s writer as the batch sees it: a freshly started process of its own
(table/writer.py), sent the batch's rows as they come and asked to write them at its end.

In the batch's process, pyarrow, delta-rs and a merge's buffers were the peak (681 MiB at a
million sessions, of which ~100 MiB was only the libraries loaded); in a process of its own the
table's memory is the writer's, which ends with the write, and the batch's stays its own. It is
started when first needed (the table's identity, for an output directory's records; the first
rows) in a session of its own, so a terminal's Ctrl-C reaches the batch alone, which ends it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from contextlib import suppress
from typing import IO, Any

import orjson

from translator.extras import MissingExtra
from translator.table.delta import TableError

SENT = 4096  # names a "gone" request carries


class TableWriter:
    """The writer process of the table at `path` (a path or URL), each store request of it
    waiting `timeout` at most. Its failures are raised here as the batch's own: TableError,
    OSError, MemoryError, MissingExtra (RuntimeError: anything else, an internal error)."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._waiting = False  # a request sent whose answer has not come

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "translator.table.writer", self.path, str(self.timeout)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        return self._proc

    def _send(self, request: list[Any]) -> None:
        proc = self._started()
        stdin: IO[bytes] = proc.stdin  # type: ignore[assignment]
        try:
            stdin.write(orjson.dumps(request) + b"\n")
            stdin.flush()  # (nothing left in the buffer for a worker forked after to inherit)
        except BrokenPipeError:  # it ended, with its reason on its stdout
            self._answer()

    def _answer(self) -> Any:
        proc = self._started()
        stdin: IO[bytes] = proc.stdin  # type: ignore[assignment]
        stdout: IO[bytes] = proc.stdout  # type: ignore[assignment]
        self._waiting = True
        with suppress(BrokenPipeError):
            stdin.flush()
        line = stdout.readline()
        self._waiting = False
        if not line:
            raise RuntimeError(f"the table's writer ended without a word (status {proc.wait()})")
        answer = orjson.loads(line)
        if answer[0] != "error":
            return answer[1]
        kind, text = answer[1], answer[2]
        raised: dict[str, type[Exception]] = {"table": TableError, "os": OSError, "memory": MemoryError,
                                              "missing": MissingExtra}
        raise raised.get(kind, RuntimeError)(text)

    def identity(self) -> str | None:
        """The table's identity (delta.identity); OSError if the store cannot say."""
        self._send(["identity"])
        found = self._answer()
        return None if found is None else str(found)

    def stage(self, rows: list[dict[str, Any]]) -> None:
        """Rows for the table, whole logs' (a log's rows all in one call)."""
        if rows:
            self._send(["rows", rows])

    def gone(self, logs: Iterable[str]) -> None:
        """Logs with no rows now: their rows in the table are deleted by the write."""
        names: list[str] = []
        for name in logs:
            names.append(name)
            if len(names) >= SENT:
                self._send(["gone", names])
                names = []
        if names:
            self._send(["gone", names])

    def write(self) -> str | None:
        """What was sent written to the table; its identity (None: nothing written)."""
        self._send(["write"])
        found = self._answer()
        return None if found is None else str(found)

    def close(self) -> None:
        """The process ended: at the end of its input, or at once when it was left waiting (the
        batch stopped while the table was written: its last commit is whole or not there)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._waiting:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            with suppress(BrokenPipeError):
                if stream is not None:
                    stream.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
