"""The results table's writer, a process of its own (`python -m translator.table.writer PATH
TIMEOUT`, started by shell/batch_table.py): the batch's process never loads pyarrow or delta-rs
(~100 MiB mapped, and a merge's buffers), so its peak is the batch's and this one's the table's.

Requests come on stdin and answers go to stdout, one JSON array a line:
  ["identity"]          -> ["identity", ID or null]   (delta.identity)
  ["rows", [ROW, ...]]  staged, no answer (a log's rows come in one request: parquet.Staged)
  ["gone", [LOG, ...]]  logs with no rows now, whose rows the write deletes; no answer
  ["write"]             -> ["written", ID or null]    (delta.write)
A failure is answered ["error", KIND, TEXT] (KIND: table, os, memory, missing, internal) and
ends the process, which the batch says as it said the same error of its own; the end of its
input ends it too, nothing written. Stop signals are the batch's: it ends this process.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import orjson

from translator.extras import MissingExtra
from translator.table import delta
from translator.table.parquet import Staged


def failure(exc: BaseException) -> list[str]:
    """An exception as the batch re-raises it: its kind and its one line."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, delta.TableError):
        return ["table", str(exc)]
    if isinstance(exc, OSError):
        return ["os", exc.strerror or text]
    if isinstance(exc, MissingExtra):
        return ["missing", str(exc)]
    scarce = type(exc).__name__ == "PanicException" and any(
        w in str(exc) for w in ("can't spawn", "Resource temporarily unavailable", "allocat", "os error 12"))
    if isinstance(exc, MemoryError) or scarce:
        return ["memory", text]
    return ["internal", f"{type(exc).__name__}: {text}"]


def serve(path: str, timeout: float, requests: Any, answers: Any) -> int:
    """Answer the batch's requests until its last; the exit status (1 after a failure)."""

    def answer(message: list[Any]) -> None:
        answers.write(orjson.dumps(message) + b"\n")
        answers.flush()

    staged: Staged | None = None
    gone: list[str] = []
    try:
        for line in requests:
            request = orjson.loads(line)
            if request[0] == "identity":
                answer(["identity", delta.identity(path, timeout)])
            elif request[0] == "rows":
                staged = staged or Staged()
                staged.add(request[1])
            elif request[0] == "gone":
                gone += request[1]
            elif request[0] == "write":
                staged = staged or Staged()
                answer(["written", delta.write(path, staged, gone, timeout)])
        return 0
    except BaseException as exc:  # (a Rust panic is no Exception) said by the batch, in its one line
        answer(["error", *failure(exc)])
        return 1
    finally:
        if staged is not None:
            staged.close()


def main() -> int:
    for signum in (signal.SIGINT, signal.SIGHUP):  # (the batch ends this process when it is stopped)
        signal.signal(signum, signal.SIG_IGN)
    return serve(sys.argv[1], float(sys.argv[2]), sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
