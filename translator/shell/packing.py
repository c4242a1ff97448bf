"""Files packed into tasks, for every engine (the local process pool and Dask alike).

A task per file costs more than a small file's translation (~1-2 ms a task to pickle, queue and
report, where a 3 KB log translates in a fraction of that), so files go in chunks of up to
CHUNK_BYTES or CHUNK_FILES; largest first, so a huge log starts at once and the small ones fill
the other cores around it; and at least SHARES chunks per worker slot, so the cores stay busy to
the end. A file as large as a chunk's share is alone.
"""

from __future__ import annotations

from translator.shell.replay import Job

CHUNK_BYTES = 2 << 20  # input bytes in one task ...
CHUNK_FILES = 64  # ... or this many files
SHARES = 4  # chunks per worker slot, at least


def pack(jobs: list[Job], slots: int) -> list[list[Job]]:
    """`jobs` in chunks, largest first; every job in exactly one chunk."""
    order = sorted(jobs, key=lambda j: -j.size)
    share = SHARES * max(1, slots)
    files = max(1, min(CHUNK_FILES, len(order) // share))
    size = max(1, min(CHUNK_BYTES, sum(j.size for j in order) // share))
    out: list[list[Job]] = []
    current: list[Job] = []
    held = 0
    for job in order:
        if current and (len(current) >= files or held + job.size > size):
            out.append(current)
            current, held = [], 0
        current.append(job)
        held += job.size
    return [*out, current] if current else out
