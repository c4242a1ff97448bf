"""One saved log translated into one output, the same way on every engine (process pool or
Dask) and every store (local disk or object storage).

The work of a file is a pure function of its bytes and its `Job`: the session id comes from its
relative path, time from its modification time, so a rerun (or a retry on another machine)
writes the same bytes. An output is committed only whole (`Store.writer`), then a small marker
beside it records the key it was made under (input, options, rate card, version) and its
results, so "up to date" is a comparison of keys and a skipped file still has its rows.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, cast

import orjson

from translator import __version__
from translator.api import make_encoder
from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.encoders import Encoder
from translator.feed import CHUNK, Feed, new_core, steps
from translator.table.rows import Recorder

NAMESPACE = uuid.UUID("7b7c2f0e-49a1-4b5e-9c1d-0c6a1e5d2b49")  # this tool's uuid5 namespace


class Store(Protocol):
    """Where inputs are read and outputs committed: local disk, or fsspec (fleet.py)."""

    def open_input(self, path: str) -> AbstractContextManager[BinaryIO]: ...
    def writer(self, path: str) -> AbstractContextManager[BinaryIO]:
        """A file whose content appears at `path` only if the block ends without an exception."""
        ...
    def read_marker(self, path: str) -> bytes | None: ...
    def write_marker(self, path: str, data: bytes) -> None: ...
    def together(self) -> AbstractContextManager[dict[str, OSError]]:
        """The writers opened inside commit at its end, in one go (local disk: one sync for
        them all, not one per file); the dict is filled then with the paths that failed."""
        ...


@dataclass(frozen=True)
class Job:
    """One file to translate, with everything a worker needs (it crosses process boundaries)."""

    format: str
    partial: bool
    results_only: bool
    rates: RateCard
    rates_digest: str  # RateCard.fingerprint(): a new card makes every output stale
    options: Options
    clock: str
    force: bool = False
    source: str = ""
    relative: str = ""
    target: str | None = None  # None: no output, only results (--results-table alone)
    size: int = 0
    mtime: float = 0.0

    def key(self) -> str:
        """What the output depends on; equal keys, equal bytes."""
        o = self.options
        parts = [__version__, self.format, self.partial, self.results_only, self.clock, o.strict,
                 o.stop_on_invalid, o.max_line_bytes, self.rates_digest, shown(self.relative), self.size, self.mtime]
        return hashlib.sha256(orjson.dumps(parts)).hexdigest()


@dataclass
class Done:
    """What became of one file."""

    relative: str
    size: int
    diagnostics: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # one row per run (table/rows.py)
    skipped: bool = False  # up to date: nothing was read but the marker
    error: str | None = None  # why the file failed
    data_error: bool = False  # it failed on its content, not on I/O


class Rejected(Exception):
    """--on-invalid fail tripped: the output is discarded."""


class Broken(Exception):
    """The compressed input is damaged or cut short (`gzip: <why>`): the output is discarded."""


def marker_path(target: str) -> str:
    head, _, name = target.rpartition("/")
    return f"{head}/.{name}.done" if head else f".{name}.done"


def shown(name: str) -> str:
    """A file name as text, for JSON, Parquet and stderr: its bytes (os.fsencode: a name that is
    not UTF-8 holds surrogate escapes, which no UTF-8 writer takes) with each undecodable byte
    as `\\xNN`; a UTF-8 name is itself."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def session_id(relative: str) -> str:
    """uuid5 of the relative path's bytes (a UTF-8 name: of its text, as before)."""
    digest = hashlib.sha1(NAMESPACE.bytes + os.fsencode(relative)).digest()  # uuid.uuid5 takes text only
    return str(uuid.UUID(bytes=digest[:16], version=5))


def counter_ids(session: str) -> Callable[[], str]:
    """Deterministic frame uuids: the nth of a session is uuid5(session, n)."""
    base = uuid.UUID(session)
    numbers = itertools.count()
    return lambda: str(uuid.uuid5(base, str(next(numbers))))


def chunks(raw: BinaryIO, progress: Callable[[int], None]) -> Iterator[bytes]:
    """The file's bytes as they are (a gzip or zstd file is inflated by the core's feed, as in
    every mode); `progress` is told the size of each."""
    while chunk := raw.read(CHUNK):
        progress(len(chunk))
        yield chunk


class _Sink:
    """The output of a run with no --out-dir: only its results are kept."""

    def write(self, data: bytes) -> int:
        return len(data)


def translate_file(job: Job, store: Store, progress: Callable[[int], None] = lambda n: None,
                   raise_io: bool = False) -> Done:
    """Translate one file (in a worker). Content that fails (a broken gzip, --on-invalid fail,
    or anything the core could not survive) is a data error; I/O trouble is an I/O error, or
    is raised with `raise_io` so that an engine that retries can retry it."""
    done, marker = _one(job, store, progress, raise_io)
    if marker is not None:
        _mark(job, store, marker, done, raise_io)
    return done


def translate_many(jobs: list[Job], store: Store, progress: Callable[[int], None] = lambda n: None) -> list[Done]:
    """A chunk of files (one task), each as translate_file does; their outputs committed
    together at the end, then their markers, so a marker never stands beside an output that
    was not committed. A file whose commit failed is an I/O error."""
    made: list[tuple[Job, Done, bytes | None]] = []
    with store.together() as failed:
        for job in jobs:
            made.append((job, *_one(job, store, progress, False)))
    for job, done, marker in made:
        if job.target is not None and (exc := failed.get(job.target)) is not None:
            done.results, done.error = [], exc.strerror or str(exc) or type(exc).__name__
        elif marker is not None:
            _mark(job, store, marker, done, False)
    return [done for _, done, _ in made]


def _mark(job: Job, store: Store, marker: bytes, done: Done, raise_io: bool) -> None:
    try:
        store.write_marker(marker_path(job.target or ""), marker)
    except OSError as exc:
        if raise_io:
            raise
        done.error = exc.strerror or str(exc) or type(exc).__name__


def _one(job: Job, store: Store, progress: Callable[[int], None], raise_io: bool) -> tuple[Done, bytes | None]:
    """The file's outcome and, when it was written, its marker (for the caller to write once
    the output is committed)."""
    done = Done(job.relative, job.size)
    marker = None
    seen = 0

    def tick(n: int) -> None:
        nonlocal seen
        seen += n
        progress(n)

    try:
        key = job.key()
        if job.target is not None and not job.force and (found := _up_to_date(job, store, key)) is not None:
            done.results, done.skipped = found, True
            return done, None
        recorder = _translate(job, store, tick, done)
        done.results = recorder.rows
        if job.target is not None:
            marker = orjson.dumps({"key": key, "results": recorder.rows})
    except Rejected:
        done.error, done.data_error = "rejected: --on-invalid fail", True
    except Broken as exc:
        done.error, done.data_error = f"broken {exc}", True
    except OSError as exc:
        if raise_io:
            raise
        done.error = exc.strerror or str(exc) or type(exc).__name__
    except Exception as exc:  # a poison file: named and failed, never the whole batch
        done.error, done.data_error = f"{type(exc).__name__}: {exc}", True
    finally:
        if seen < job.size:
            progress(job.size - seen)  # skipped, failed or grown: the bar still ends at 100%
    return done, marker


def _up_to_date(job: Job, store: Store, key: str) -> list[dict[str, Any]] | None:
    """The results recorded with the output, if it was made under the same key."""
    data = store.read_marker(marker_path(job.target or ""))
    try:
        marker = orjson.loads(data) if data is not None else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(marker, dict) or marker.get("key") != key:
        return None
    rows = marker.get("results")
    return rows if isinstance(rows, list) else None


def _translate(job: Job, store: Store, progress: Callable[[int], None], done: Done) -> Recorder:
    session = session_id(job.relative)
    # With no output, the encoder writes only results: the cheapest pass that still sees them.
    encoder = make_encoder(job.format, session, include_partial_messages=job.partial,  # type: ignore[arg-type]
                           results_only=job.results_only or job.target is None, rates=job.rates,
                           new_id=counter_ids(session) if job.format == "claude-code" else None)
    source = shown(job.source)
    recorder = Recorder(encoder, session, source, job.mtime)
    feed = Feed(new_core(cast(Encoder, recorder), rates=job.rates, options=job.options, clock=job.clock, live=False,
                         epoch=job.mtime, source=source))
    sink: AbstractContextManager[Any] = store.writer(job.target) if job.target is not None else _null()
    with store.open_input(job.source) as raw, sink as out:
        for taken in steps(feed, chunks(raw, progress)):
            if feed.broken is not None:
                raise Broken(feed.broken)
            out.write(b"".join(taken.frames))
            done.diagnostics += taken.diagnostics
        if feed.core.bad_lines and job.options.stop_on_invalid:
            raise Rejected
    return recorder


class _null(AbstractContextManager[_Sink]):
    def __enter__(self) -> _Sink:
        return _Sink()

    def __exit__(self, *exc: object) -> None:
        return None
