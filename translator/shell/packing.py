"""Files packed into tasks, for every engine (the local process pool and Dask alike), and the
jobs to do held on disk until they are packed.

A task per file costs more than a small file's translation (~1-2 ms a task to pickle, queue and
report, where a 3 KB log translates in a fraction of that), so files go in chunks of up to
CHUNK_BYTES or CHUNK_FILES; largest first, so a huge log starts at once and the small ones fill
the other cores around it; and at least SHARES chunks per worker slot, so the cores stay busy to
the end. A file as large as a chunk's share is alone. The order is a sort on disk (`Todo`), not
of a job per file held (~0.5 KB each): chunks are made as the pool takes them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import replace

from translator.shell.replay import Job
from translator.shell.scratch import BATCH, database, got, put

CHUNK_BYTES = 2 << 20  # input bytes in one task ...
CHUNK_FILES = 64  # ... or this many files
SHARES = 4  # chunks per worker slot, at least


class Todo(Collection[Job]):
    """The jobs to do, one template's, on disk (scratch.py): each made again as it is taken,
    largest first (the order they were added in among equals)."""

    def __init__(self, template: Job) -> None:
        self.template = template
        self.db = database()
        self.db.execute("CREATE TABLE todo (n INTEGER PRIMARY KEY, size INTEGER, mtime REAL, source BLOB, "
                        "relative BLOB, target BLOB)")
        self._pending: list[tuple[object, ...]] = []
        self.count = self.bytes = 0

    def append(self, job: Job) -> None:
        self._pending.append((self.count, job.size, job.mtime, put(job.source), put(job.relative),
                              None if job.target is None else put(job.target)))
        self.count += 1
        self.bytes += job.size
        if len(self._pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        self.db.executemany("INSERT INTO todo VALUES (?, ?, ?, ?, ?, ?)", self._pending)
        self._pending = []

    def __len__(self) -> int:
        return self.count

    def __contains__(self, job: object) -> bool:
        return any(job == mine for mine in self)

    def __iter__(self) -> Iterator[Job]:
        self._flush()
        for size, mtime, source, relative, target in self.db.execute(
                "SELECT size, mtime, source, relative, target FROM todo ORDER BY size DESC, n"):
            yield replace(self.template, size=size, mtime=mtime, source=got(source), relative=got(relative),
                          target=None if target is None else got(target))

    def close(self) -> None:
        self._pending = []
        self.db.close()


def size_of(jobs: Collection[Job]) -> int:
    """The input bytes of `jobs`."""
    return jobs.bytes if isinstance(jobs, Todo) else sum(j.size for j in jobs)


def pack(jobs: Collection[Job], slots: int, most_files: int = CHUNK_FILES,
         most_bytes: int = CHUNK_BYTES) -> Iterator[list[Job]]:
    """`jobs` in chunks of up to `most_files` files or `most_bytes` input bytes (an engine whose
    tasks cost more takes bigger ones), largest first, each made as it is taken; every job in
    exactly one."""
    order = iter(jobs) if isinstance(jobs, Todo) else iter(sorted(jobs, key=lambda j: -j.size))
    share = SHARES * max(1, slots)
    files = max(1, min(most_files, len(jobs) // share))
    size = max(1, min(most_bytes, size_of(jobs) // share))
    current: list[Job] = []
    held = 0
    for job in order:
        if current and (len(current) >= files or held + job.size > size):
            yield current
            current, held = [], 0
        current.append(job)
        held += job.size
    if current:
        yield current
