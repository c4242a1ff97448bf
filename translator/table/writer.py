"""The results table's writer, a process of its own (`python -m translator.table.writer PATH
TIMEOUT`, started by shell/batch_table.py): the batch's process never loads pyarrow or delta-rs
(~100 MiB mapped, and a merge's buffers), so its peak is the batch's and this one's the table's.

Requests come on stdin and answers go to stdout, one JSON array a line:
  ["identity"]          -> ["identity", ID or null]   (delta.identity)
  ["rows", [ROW, ...]]  staged, no answer (a log's rows come in one request: parquet.Staged)
  ["gone", [LOG, ...]]  logs with no rows now, whose rows the write deletes; no answer
  ["write"]             -> ["written", ID or null]    (delta.write)
The write is made by a fresh image of the process (exec, same pid and pipes) on the staging
saved to its folder: the staging's leftovers (~70 MiB of freed, unreturned heap at a million
rows) are not under the merges' peak (265 MiB in one image, 167 and 221 MiB apart).
A failure is answered ["error", KIND, TEXT] (KIND: table, os, memory, missing, internal) and
ends the process, which the batch says as it said the same error of its own; the end of its
input ends it too, nothing written. Stop signals are the batch's: it ends this process.
"""

from __future__ import annotations

import os
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
            elif request[0] == "write":  # in a fresh image of this process: the staging's memory is not the merges'
                folder = (staged or Staged()).save(gone)
                answers.flush()
                os.execv(sys.executable, [sys.executable, "-m", "translator.table.writer", "--staged", folder, path, str(timeout)])
        return 0
    except BaseException as exc:  # (a Rust panic is no Exception) said by the batch, in its one line
        answer(["error", *failure(exc)])
        return 1
    finally:
        if staged is not None:
            staged.close()


def write(folder: str, path: str, timeout: float, answers: Any) -> int:
    """The staging saved in `folder` written to the table, answered as `serve` answers; the exit status."""
    staged, gone = Staged.reopened(folder)
    try:
        message = ["written", delta.write(path, staged, gone, timeout)]
    except BaseException as exc:  # (as serve's)
        message = ["error", *failure(exc)]
    finally:
        staged.close()
    answers.write(orjson.dumps(message) + b"\n")
    answers.flush()
    return 0 if message[0] == "written" else 1


def main() -> int:
    # pyarrow's default pool (mimalloc) kept the freed heap of the table's scan under the merges'
    # peak (~40 MiB of a million rows' 1%-touched write); the system's gives it back (release_unused)
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    for signum in (signal.SIGINT, signal.SIGHUP):  # (the batch ends this process when it is stopped)
        signal.signal(signum, signal.SIG_IGN)
    if sys.argv[1] == "--staged":
        return write(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.stdout.buffer)
    return serve(sys.argv[1], float(sys.argv[2]), sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
