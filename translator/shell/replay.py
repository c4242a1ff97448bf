"""One saved log translated into one output, the same way on every engine (process pool or
Dask) and every store (local disk or object storage).

The work of a file is a pure function of its bytes and its `Job`: the session id comes from its
full path or URL (never from a path relative to the run's root, which two logs of one name
under two roots share), time from its modification time, so a rerun (or a retry on another machine)
writes the same bytes. An output is committed only whole (`Store.writer`), a chunk's together,
and the chunk's record (ledger.py) keeps the key each was made under (input, options, rate card,
version) and its results, so "up to date" is a comparison of keys and a skipped file still has
its rows.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

import orjson

from translator import telemetry
from translator.core.feed import CHUNK, Feed, new_core, steps
from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.encoders.formats import make_encoder
from translator.encoders.observed import Observer, StreamId, folder_of, observer_of, session_id_of
from translator.shell import ledger
from translator.table.rows import Recorder
from translator.version import __version__


class Store(Protocol):
    """Where inputs are read and outputs committed: local disk, or fsspec (fleet.py)."""

    def open_input(self, path: str) -> AbstractContextManager[BinaryIO]: ...
    def writer(self, path: str) -> AbstractContextManager[BinaryIO]:
        """A file whose content appears at `path` only if the block ends without an exception."""
        ...
    def together(self, record: str | None = None, head: bytes = b"") -> AbstractContextManager[dict[str, OSError]]:
        """The writers opened inside commit at its end, in one go (local disk: one sync for
        them all, not one per file); the dict is filled then with the paths that failed.
        `head`, the first part of the chunk's `record`, is written before any of them is
        committed (raises OSError if it cannot be)."""
        ...
    def close_record(self, record: str, head: bytes, tail: bytes) -> None:
        """The record complete: `tail` after `head`."""
        ...


@dataclass(frozen=True, slots=True)  # (slots: a fleet holds a job per file, ~0.2 KB less each)
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
    transcripts: str | None = None  # --transcripts DIR: each file's runs as a session file there
    # the command's telemetry variables (telemetry.variables), the workers' exporter made from them;
    # not in the key: telemetry changes no output (a backfill of files done already takes --force)
    telemetry: tuple[tuple[str, str], ...] = ()

    def of(self, source: str, relative: str, size: int, mtime: float, target: str | None) -> Job:
        """This job's settings for one file (dataclasses.replace, written out: its look at every
        field was a sixth of an unchanged rerun's time)."""
        return Job(self.format, self.partial, self.results_only, self.rates, self.rates_digest, self.options, self.clock,
                   force=self.force, source=source, relative=relative, target=target, size=size, mtime=mtime,
                   transcripts=self.transcripts, telemetry=self.telemetry)

    def key(self) -> str:
        """What the output depends on; equal keys, equal bytes."""
        o = self.options
        parts = [__version__, self.format, self.partial, self.results_only, self.clock, o.strict,
                 o.stop_on_invalid, o.max_line_bytes, self.rates_digest, shown(self.relative), shown(self.source), self.size,
                 self.mtime]
        if self.transcripts is not None:  # a file done without them is not done with them
            parts.append(os.path.abspath(self.transcripts))
        return hashlib.sha256(orjson.dumps(parts)).hexdigest()


@dataclass(slots=True)
class Done:
    """What became of one file."""

    relative: str
    size: int
    diagnostics: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # one row per run (table/rows.py)
    skipped: bool = False  # up to date: its record says so, nothing was read
    error: str | None = None  # why the file failed
    data_error: bool = False  # it failed on its content, not on I/O
    source: str = ""  # the log's full path or URL (shown): whose rows a results table replaces
    tabled: bool = False  # up to date, and its rows in the results table already (ledger.Tabled)


class Rejected(Exception):
    """--on-invalid fail tripped: the output is discarded."""


class Broken(Exception):
    """The compressed input is damaged or cut short (`gzip: <why>`): the output is discarded."""


def shown(name: str) -> str:
    """A file name as text, for JSON, Parquet and stderr: its bytes (os.fsencode: a name that is
    not UTF-8 holds surrogate escapes, which no UTF-8 writer takes) with each undecodable byte
    as `\\xNN`; a UTF-8 name is itself."""
    return name if name.isascii() else os.fsencode(name).decode("utf-8", "backslashreplace")


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


def translate_file(job: Job, store: Store, record: str | None = None) -> Done:
    """One file as a chunk of its own, its I/O errors raised for an engine that retries."""
    return translate_many([job], store, record=record, raise_io=True)[0]


def translate_many(jobs: list[Job], store: Store, progress: Callable[[int], None] = lambda n: None,
                   record: str | None = None, raise_io: bool = False) -> list[Done]:
    """Translate a chunk of files (one task, in a worker); their outputs committed together at
    the end, inside the chunk's `record` (ledger.py), which then gets an entry for each output
    committed. Content that fails (a broken gzip, --on-invalid fail, or anything the core could
    not survive) is a data error; I/O trouble (a commit that failed too) an I/O error, or is
    raised with `raise_io` so that an engine that retries can retry it."""
    files = [shown(job.relative) for job in jobs if job.target is not None]
    head = ledger.head(files)
    made: list[tuple[Job, Done, str | None]] = []
    if not files:
        record = None
    try:
        with store.together(record, head) as failed:
            for job in jobs:
                made.append((job, *_one(job, store, progress, raise_io)))
    except OSError as exc:  # the record's head: nothing is committed
        if raise_io:
            raise
        return [Done(job.relative, job.size, error=f"its up-to-date record: {_why(exc)}") for job in jobs]
    committed = []
    for job, done, key in made:
        if job.target is not None and (fault := failed.get(job.target)) is not None:
            if raise_io:
                raise fault
            done.results, done.error = [], _why(fault)
        elif key is not None:
            committed.append((shown(job.relative), key, done.source, done.results))
    if record is not None and committed:
        try:
            store.close_record(record, head, ledger.entries(committed))
        except OSError as exc:  # the outputs are there, but will be redone
            if raise_io:
                raise
            for _, done, key in made:
                if key is not None and done.error is None:
                    done.error = f"its up-to-date record: {_why(exc)}"
    if jobs and jobs[0].telemetry and (exporter := telemetry.for_worker(jobs[0].telemetry)) is not None:
        exporter.flush()  # the chunk's telemetry out before its results go back (a worker may never exit)
    return [done for _, done, _ in made]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _one(job: Job, store: Store, progress: Callable[[int], None], raise_io: bool) -> tuple[Done, str | None]:
    """The file's outcome and, when its output was written, the key it was made under."""
    done = Done(job.relative, job.size, source=shown(job.source))
    made = None
    seen = 0

    def tick(n: int) -> None:
        nonlocal seen
        seen += n
        progress(n)

    try:
        recorder = _translate(job, store, tick, done)
        done.results = recorder.rows
        if job.target is not None:
            made = job.key()
    except Rejected:
        done.error, done.data_error = "rejected: --on-invalid fail", True
    except Broken as exc:
        done.error, done.data_error = f"broken {exc}", True
    except OSError as exc:
        if raise_io:
            raise
        done.error = _why(exc)
    except Exception as exc:  # a poison file: named and failed, never the whole batch
        done.error, done.data_error = f"{type(exc).__name__}: {exc}", True
    finally:
        if seen < job.size:
            progress(job.size - seen)  # failed or grown: the bar still ends at 100%
    return done, made


def _translate(job: Job, store: Store, progress: Callable[[int], None], done: Done) -> Recorder:
    session = session_id_of(job.source)
    # With no output, the encoder writes only results: the cheapest pass that still sees them.
    encoder = make_encoder(job.format, session, include_partial_messages=job.partial,  # type: ignore[arg-type]
                           results_only=job.results_only or job.target is None, rates=job.rates,
                           new_id=counter_ids(session) if job.format == "claude-code" else None)
    source = shown(job.source)
    recorder = Recorder(job.mtime)
    feed = Feed(new_core(encoder, rates=job.rates, options=job.options, clock=job.clock, live=False, epoch=job.mtime,
                         source=source, observer=observer_of([recorder, *watching(job)]), stream=StreamId(source, session, folder_of(job.source))))
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


def watching(job: Job) -> list[Observer]:
    """What else watches the file's runs: --transcripts' session file, the telemetry (the
    worker's exporter)."""
    found: list[Observer] = []
    if job.transcripts is not None:
        from translator.transcripts.files import Transcripts

        found.append(Transcripts(job.transcripts, __version__).observer())
    if job.telemetry and (exporter := telemetry.for_worker(job.telemetry)) is not None:
        from translator.telemetry.deferred import Opening

        found.append(Opening(lambda: exporter, detailed=exporter.instruments.detailed))
    return found


class _null(AbstractContextManager[_Sink]):
    def __enter__(self) -> _Sink:
        return _Sink()

    def __exit__(self, *exc: object) -> None:
        return None
