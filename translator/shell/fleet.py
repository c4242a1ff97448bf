"""Fleet scale: the batch over object storage (fsspec) and on a Dask cluster (cluster.py).

The per-file work is replay.py's, unchanged; this adds a store for URLs and the choice of
engine. Object stores commit an output at the end of its write, local disk renames finished
temporaries, so a task run again (a worker lost, or given up on) never leaves an output partial
or doubled.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from translator.diagnostics import stderr
from translator.exits import EX_IOERR, EX_UNAVAILABLE, EX_USAGE
from translator.extras import MissingExtra, need
from translator.object_store import TIMEOUT, StoreError, configured_timeout, faults, filesystem
from translator.shell import batch, ledger
from translator.shell.batch_listing import ran
from translator.shell.batch_table import TableWriter
from translator.shell.cluster import Unreachable, run_dask
from translator.shell.ledger import Ledger
from translator.shell.local_disk import LocalStore, streamed, sweep_temporaries
from translator.shell.outcomes import Outcomes
from translator.shell.packing import Todo, size_of
from translator.shell.pool import run_local
from translator.shell.progress import Progress
from translator.shell.replay import Job, Store
from translator.shell.selection import Found, SelectionError
from translator.shell.stalls import TASK_TIMEOUT

SMALL = 8 << 20  # outputs up to this are uploaded in one PUT; larger ones as a multipart upload


def _mtime(info: dict[str, Any]) -> float:
    """Modification time from a listing entry, whatever the store calls it."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            with suppress(ValueError):
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return 0.0


class Lister:
    """Selection over one fsspec filesystem (paths without their protocol); a store's fault is
    an I/O error naming what was listed, not a missing input."""

    def __init__(self, fs: Any, scheme: str, timeout: float) -> None:
        self.fs, self.scheme, self.timeout = fs, scheme, timeout

    def _faults(self, path: str) -> AbstractContextManager[None]:
        return faults(f"{self.scheme}://{path}", self.timeout)

    def absolute(self, name: str) -> str:
        return str(self.fs._strip_protocol(name)).rstrip("/")  # reach-in: fsspec's own way to a bare path

    def kind(self, path: str) -> str | None:
        try:
            with self._faults(path):
                info = self.fs.info(path)
        except FileNotFoundError:
            return None
        return "dir" if info.get("type") == "directory" else "file"

    def _found(self, info: dict[str, Any]) -> Found:
        return Found(str(info["name"]).rstrip("/"), int(info.get("size") or 0), _mtime(info))

    def stat(self, path: str) -> Found:
        with self._faults(path):
            return self._found(self.fs.info(path))

    def files_under(self, path: str) -> list[Found]:
        with self._faults(path):
            found = self.fs.find(path, detail=True).values()
        return [self._found(i) for i in found if i.get("type") != "directory"]

    def glob(self, pattern: str) -> list[Found]:
        with self._faults(pattern):
            found = self.fs.glob(pattern, detail=True).values()
        return [self._found(i) for i in found if i.get("type") != "directory"]


class _Reading:
    """An object being read: its store's faults are StoreErrors naming it."""

    def __init__(self, file: Any, url: str, timeout: float) -> None:
        self.file, self.url, self.timeout = file, url, timeout

    def read(self, size: int = -1) -> bytes:
        with faults(self.url, self.timeout):
            return bytes(self.file.read(size))

    def __enter__(self) -> _Reading:
        return self

    def __exit__(self, *exc: object) -> None:
        with suppress(Exception):
            self.file.close()


class _Upload:
    """An object written whole or not at all: held in memory up to SMALL and PUT at commit;
    past that streamed as a multipart upload that only commit() completes."""

    def __init__(self, fs: Any, path: str, url: str, timeout: float) -> None:
        self.fs, self.path, self.url, self.timeout = fs, path, url, timeout
        self.buffer = io.BytesIO()
        self.file: Any = None

    def write(self, data: bytes) -> int:
        if self.file is None:
            self.buffer.write(data)
            if self.buffer.tell() > SMALL:
                with faults(self.url, self.timeout):
                    self.file = self.fs.open(self.path, "wb", autocommit=False)
                    self.file.write(self.buffer.getvalue())
                self.buffer = io.BytesIO()
        else:
            with faults(self.url, self.timeout):
                self.file.write(data)
        return len(data)

    def commit(self) -> None:
        with faults(self.url, self.timeout):
            if self.file is None:
                self.fs.pipe_file(self.path, self.buffer.getvalue())
            else:
                self.file.close()
                self.file.commit()

    def discard(self) -> None:
        if self.file is not None:
            with suppress(Exception):
                self.file.close()
                self.file.discard()


class FsspecStore:
    """Inputs and outputs by URL through fsspec (local paths stay with LocalStore), each
    request waiting `timeout` seconds at most (object_store.filesystem)."""

    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.local = LocalStore()
        self.timeout = timeout
        self._stamped: dict[str, str] = {}  # the chunk's record on the store -> its name (ledger.restamp)

    def _fs(self, url: str) -> tuple[Any, str]:
        with faults(url, self.timeout):
            return filesystem(url, self.timeout)

    def open_input(self, path: str) -> AbstractContextManager[Any]:
        if "://" not in path:
            return self.local.open_input(path)
        fs, bare = self._fs(path)
        with faults(path, self.timeout):
            return _Reading(fs.open(bare, "rb"), path, self.timeout)

    def writer(self, path: str) -> AbstractContextManager[Any]:
        return self.local.writer(path) if "://" not in path else self._upload(path)

    @contextmanager
    def _upload(self, path: str) -> Iterator[_Upload]:
        upload = _Upload(*self._fs(path), path, self.timeout)
        try:
            yield upload
            upload.commit()
        except BaseException:
            upload.discard()
            raise

    def together(self, record: str | None = None, head: bytes = b"") -> AbstractContextManager[dict[str, OSError]]:
        """Local outputs as LocalStore commits them; an object is committed whole by its own
        PUT (or multipart completion) as its writer ends, so a record on the store has its
        head PUT before the chunk starts, named for that moment (ledger.restamp: a store has no
        lock, so two runs on one prefix are ordered by their chunks' starts, not their commits)."""
        if record is None or "://" not in record:
            return self.local.together(record, head)
        self._stamped = {record: ledger.restamp(record, time.time_ns())}
        self._put(self._stamped[record], head)
        return self.local.together()

    def close_record(self, record: str, head: bytes, tail: bytes) -> None:
        if "://" not in record:
            self.local.close_record(record, head, tail)
        else:
            self._put(self._stamped.pop(record, record), head + tail)

    def _put(self, path: str, data: bytes) -> None:
        fs, bare = self._fs(path)
        with faults(path, self.timeout):
            fs.pipe_file(bare, data)


def plan(names: list[str], out_dir: str | None, template: Job, timeout: float = TIMEOUT,
         writer: TableWriter | None = None) -> tuple[Iterator[Job], Store, Ledger | None]:
    """The jobs, the store that reads and writes them, and what the output's records say. The
    local folders a worker writes (--out-dir, --transcripts) are named absolute: a cluster's
    workers write them from their own working directory (a relative --out-dir put every output
    there: "10 translated", `out/` empty)."""
    if out_dir is not None and "://" not in out_dir:
        out_dir = os.path.abspath(out_dir)
    if template.transcripts is not None:
        template = replace(template, transcripts=os.path.abspath(template.transcripts))
    remote = [n for n in names if "://" in n]
    url: Callable[[str], str] = str
    if not remote:
        lister: Any = LocalStore()
    else:
        protocols = {n.split("://", 1)[0] for n in names}
        if len(protocols) > 1 or len(remote) != len(names):
            raise SelectionError("inputs must all be on one store (all local, or all under one URL scheme)", EX_USAGE)
        scheme = protocols.pop()
        with faults(names[0], timeout):
            fs, _ = filesystem(names[0], timeout)
        lister = Lister(fs, scheme, timeout)
        url = lambda path: f"{scheme}://{path}"  # noqa: E731 (named by the annotation above)
    store: Store = LocalStore() if not remote and "://" not in (out_dir or "") else FsspecStore(timeout)
    records = None
    if out_dir is not None:
        records = batch.prepare_out_dir(out_dir, writer) if "://" not in out_dir \
            else _records(out_dir, timeout, writer)
    return batch.planned(names, lister, out_dir, template, url), store, records


def _records(out_dir: str, timeout: float, writer: TableWriter | None = None) -> Ledger:
    """What the records under an object-store prefix say: one listing of it (paginated by the
    store, not a walk of its "folders"), then the records read together, the dead removed. If
    it cannot be listed or read, nothing is known: everything is made again (and a fault of
    the store is said there, file by file)."""
    scheme = out_dir.split("://", 1)[0]
    folder = f"{out_dir.rstrip('/')}/{ledger.FOLDER}"
    now, pid = time.time_ns(), os.getpid()
    table = batch.tabled(folder, writer, timeout)
    try:
        with faults(out_dir, timeout):
            fs, path = filesystem(out_dir, timeout)
            found = [f"{scheme}://{name}" for name in fs.find(path)]
            paths = [name for name in found if name.startswith(f"{folder}/") and ledger.is_record(name)]

        def fetch(batch: list[str]) -> dict[str, bytes]:
            with faults(out_dir, timeout):
                data = fs.cat([p.split("://", 1)[1] for p in batch])
            return {f"{scheme}://{name}": bytes(value) for name, value in data.items()}

        got = ledger.read(folder, ledger.Lazy(paths, fetch), now, pid, set(found) - set(paths), table)
    except FileNotFoundError:  # nothing written there yet
        return ledger.read(folder, {}, now, pid, set())
    except OSError:
        return ledger.read(folder, {}, now, pid, None)
    if got.dead:
        with suppress(OSError), faults(out_dir, timeout):
            fs.rm([p.split("://", 1)[1] for p in got.dead])
    return got


def run(names: list[str], out_dir: str | None, workers: int, template: Job,
        results_table: str | None, cluster: str | None, store_timeout: float | None = None,
        task_timeout: float = TASK_TIMEOUT) -> int:
    """Translate everything under `names` (paths or URLs) on the local pool or on Dask, each
    request to a store waiting `store_timeout` at most (None: $TRANSLATOR_STORE_TIMEOUT or the
    default). A stop signal (SIGINT, SIGTERM, SIGHUP), even while a store keeps a request
    waiting, ends it with its summary and the signal's status, whether listing, translating or
    writing the table."""
    try:
        return _run(names, out_dir, workers, template, results_table, cluster, configured_timeout(store_timeout),
                    task_timeout)
    finally:
        if out_dir is not None and "://" not in out_dir:
            ran(out_dir)


def _run(names: list[str], out_dir: str | None, workers: int, template: Job, results_table: str | None,
         cluster: str | None, timeout: float, task_timeout: float) -> int:
    came: list[int] = []
    started = time.monotonic()
    made = unmade(out_dir)
    with batch.stopping(came):
        try:
            done = Outcomes(None if results_table is None else TableWriter(results_table, timeout))
            jobs, store, records = plan(names, out_dir, template, timeout, done.writer)
            todo, _ = batch.up_to_date(jobs, records, done)
            del jobs
            if cluster is not None:
                need("distributed")
        except KeyboardInterrupt:  # listing: nothing done yet
            return batch.summary(Outcomes(), time.monotonic() - started, True, came[0] if came else signal.SIGINT)
        except (SelectionError, MissingExtra) as exc:
            stderr([f"translator: {exc}"])
            return exc.status
        except StoreError as exc:  # listing the store failed: it named the object
            stderr([f"translator: {exc.strerror}"])
            return EX_IOERR
        except OSError as exc:  # listing the store failed (credentials, no bucket)
            stderr([f"translator: {' '.join(names)}: {exc.strerror or exc}"])
            return EX_IOERR
        try:
            interrupted = _translate(todo, store, cluster, workers, records, came, task_timeout, done)
            if isinstance(todo, Todo):  # done: not held while the table is written
                todo.close()
        except Unreachable as exc:
            done.close()
            remove_empty(made)
            stderr([f"translator: {exc}"])
            return EX_UNAVAILABLE
        if out_dir is not None and "://" not in out_dir:
            sweep_temporaries(out_dir)[0].close()  # a lost worker's, whose file was done again elsewhere
        try:
            return batch.finish(done, time.monotonic() - started, results_table, interrupted,
                                came[0] if came else signal.SIGINT, timeout, records)
        except KeyboardInterrupt:  # writing the table: the one there is stays as it was
            stderr([f"translator: --results-table {results_table}: not written (interrupted)"])
            return 128 + (came[0] if came else signal.SIGINT)


def unmade(out_dir: str | None) -> Path | None:
    """The topmost folder of a local --out-dir that is not there yet (what this run makes)."""
    if out_dir is None or "://" in out_dir:
        return None
    path, top = Path(out_dir).absolute(), None
    while not path.exists() and path != path.parent:
        path, top = path.parent, path
    return top


def remove_empty(top: Path | None) -> None:
    """The folders a run made under `top` and left empty, removed (a cluster that could not be
    reached left an empty --out-dir, its records' folder in it)."""
    if top is None:
        return
    for folder, _, _ in os.walk(top, topdown=False):
        with suppress(OSError):  # not empty: something is in it, kept
            os.rmdir(folder)


def _translate(jobs: Collection[Job], store: Store, cluster: str | None, workers: int,
               records: Ledger | None, came: list[int], task_timeout: float, done: Outcomes) -> bool:
    """The jobs done on the local pool or on Dask, and whether a stop signal cut them short (the
    pool's workers are then ended: one a store keeps waiting would hold the exit). Nothing to
    do (every file up to date) starts no cluster and no pool."""
    if not jobs:
        return False
    size = size_of(jobs)
    if isinstance(store, LocalStore):  # (the store's own, kept: a subclass stays what it is)
        store.forget = streamed(size)
    try:
        with Progress(size, len(jobs)) as bar:
            if cluster is not None:
                return run_dask(jobs, store, cluster, workers, bar, records, task_timeout, done)[1]
            # The signal only noted here (the workers do the store's waiting): one raised in the
            # parent is lost, the batch running on, if it lands while the pool forks.
            with batch.stopping(came, raising=False):
                _, interrupted = run_local(jobs, workers, bar, store, records, came, done, task_timeout)
    except KeyboardInterrupt:  # starting or leaving the engine
        interrupted = True
    if interrupted:
        for worker in multiprocessing.active_children():
            worker.kill()
            worker.join()
    return interrupted
