"""The batch on a Dask cluster: one task per chunk of files (packing.py: largest first, so a huge
log starts at once and the small ones fill the cores around it; chunks 4x the local pool's, a
Dask task costing ~10x a pool task), translated in the worker's own
process by replay.py. I/O errors are raised for Dask to retry (RETRIES times; a file that had one
inside a chunk is given a task of its own); a file whose content fails is not retried (it would
fail the same way). A worker lost mid-chunk has its task run again elsewhere: its outputs were
never committed, so no output is partial or doubled. A worker that holds a task past
`--task-timeout` without finishing any is given up on, and its tasks run on the others
(stalls.py). At most WINDOW chunks a worker slot are in flight, more packed and sent as they
finish: the client and the scheduler hold a window of the batch, not all of it.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from translator.extras import need
from translator.object_store import StoreError
from translator.shell.ledger import Ledger
from translator.shell.outcomes import Outcomes, report_done
from translator.shell.packing import CHUNK_BYTES, CHUNK_FILES, pack
from translator.shell.progress import Progress
from translator.shell.replay import Done, Job, Store, translate_file, translate_many
from translator.shell.stalls import TASK_TIMEOUT, Stalls

RETRIES = 2
# A Dask task costs ~4-7 ms of CPU between the client, the scheduler and the worker (a pool
# task ~0.5 ms), on the cores that translate: its chunks are 4x the pool's (packing.py), still
# at least SHARES per worker slot.
TASK_FILES = 4 * CHUNK_FILES
TASK_BYTES = 4 * CHUNK_BYTES
POLL = 1.0  # seconds between two looks at what the workers hold
# Chunks in flight per worker slot (the pool's 2, one running and one queued behind it, and one
# more: a Dask task's round trip, client to scheduler to worker, is ~10x a pool task's).
WINDOW = 3


def _task(job: Job, store: Store, record: str | None) -> Done:
    """A Dask task: one file, in the worker's process; I/O errors go back to Dask to retry."""
    return translate_file(job, store, record)


def _group_task(jobs: list[Job], record: str | None, store: Store) -> list[Done]:
    """A Dask task: a chunk of files, one after another (I/O errors come back as results, and
    the client gives each such file a task of its own, which Dask retries)."""
    return translate_many(jobs, store, record=record)


@contextmanager
def connect(cluster: str, workers: int) -> Iterator[Any]:
    """A client of the named scheduler, or of a LocalCluster of `local[:N]` processes."""
    distributed = need("distributed")
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # what fails is in our summary
    if cluster == "local" or cluster.startswith("local:"):
        n = int(cluster.partition(":")[2] or workers)
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=":0", silence_logs=logging.CRITICAL) as lc, \
                distributed.Client(lc) as client:
            yield client
    else:
        try:
            client = distributed.Client(cluster, timeout="30s")
        except OSError as exc:  # nothing there, or it does not answer in time
            raise Unreachable(f"--cluster {cluster}: cannot connect: {exc}") from exc
        with client:
            yield client


class Unreachable(Exception):
    """The named scheduler cannot be reached: a user's error (69), not the batch's."""


def settle(work: list[Job] | Job, value: Any) -> list[Done | Job]:
    """What a finished task came to, file by file: its result, or its job to run again in a
    task of its own (an I/O error inside a group; every file of a group that failed as a
    whole, e.g. whose workers kept dying, so that one bad file cannot sink its neighbours)."""
    if isinstance(work, Job):
        if isinstance(value, Done):
            return [value]
        exc = value[1] if isinstance(value, tuple) else value  # as_completed's (type, value, traceback)
        said = exc.strerror if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
        return [Done(work.relative, work.size, error=said)]
    if not isinstance(value, list):
        return list(work)
    return [job if d.error is not None and not d.data_error else d for d, job in zip(value, work, strict=True)]


def run_dask(jobs: Collection[Job], store: Store, cluster: str, workers: int, bar: Progress,
             records: Ledger | None = None, task_timeout: float = TASK_TIMEOUT,
             done: Outcomes | None = None) -> tuple[Outcomes, bool]:
    distributed = need("distributed")
    done = Outcomes() if done is None else done
    with connect(cluster, workers) as client:
        if not bar.bar.disable and client.dashboard_link:  # (on a terminal: a log gets no link to follow)
            bar.say([f"translator: Dask dashboard: {client.dashboard_link}"], "info")
        slots = sum(client.nthreads().values())
        chunks = enumerate(pack(jobs, slots, TASK_FILES, TASK_BYTES))  # each made as it is sent

        def record(chunk: int | str) -> str | None:
            return None if records is None else records.path(chunk)

        futures: dict[Any, list[Job] | Job] = {}  # every task awaited
        # Results come back in batches with the completions, not one round trip each.
        finished = distributed.as_completed(with_results=True, raise_errors=False)
        stalls, polled = Stalls(task_timeout), time.monotonic()
        given_up: set[str] = set()  # workers past the deadline: none of the batch's tasks go there again
        abandoned: list[Any] = []  # their tasks, run again elsewhere (cancelled at the end)
        tries: dict[str, int] = {}  # a task run again past the deadline -> how many times

        def others() -> list[str] | None:
            return [w for w in client.scheduler_info()["workers"] if w not in given_up] if given_up else None

        def more() -> None:
            """The next chunks, up to the window, in one scheduler update: client.map runs its tasks
            in the order given, and each update a generation after the last (fifo_timeout 0),
            so the chunks run as packed, largest first: a huge log starts at once and the small
            ones fill the other cores around it."""
            sent = list(itertools.islice(chunks, max(0, WINDOW * slots - len(futures))))
            if not sent:
                return
            keys = [f"translate-{os.getpid()}-{n}-{hashlib.sha1(g[0].source.encode()).hexdigest()[:16]}"
                    for n, g in sent]
            mapped = client.map(_group_task, [g for _, g in sent], [record(n) for n, _ in sent], store=store,
                                key=keys, workers=others(), allow_other_workers=False, retries=RETRIES,
                                pure=False, fifo_timeout="0 ms")
            futures.update(zip(mapped, [g for _, g in sent], strict=True))
            finished.update(mapped)

        def submit(work: list[Job] | Job, key: str, chunk: int | str) -> None:
            function = _task if isinstance(work, Job) else _group_task
            args = (work, store, record(chunk)) if isinstance(work, Job) else (work, record(chunk), store)
            future = client.submit(function, *args, key=key, workers=others(), allow_other_workers=False,
                                   retries=RETRIES, pure=False)
            futures[future] = work
            finished.add(future)

        def late(now: float) -> None:
            """The tasks of the workers past the deadline, run again on the others (each at most
            RETRIES times, then their files fail); with no other worker left, every file left fails,
            the chunks not sent yet too (as their first try)."""
            held = {future.key: future for future in futures}
            stuck = stalls.stuck(client.processing(), set(held), now)
            given_up.update(stuck)
            left = not given_up or not set(client.scheduler_info()["workers"]) <= given_up
            ours = {key for keys in stuck.values() for key in keys} if left else set(held)
            gone: list[tuple[str, list[Job] | Job]] = [(key, futures.pop(held[key])) for key in ours]
            abandoned.extend(held[key] for key, _ in gone)
            if not left:  # none would run the chunks not sent yet either
                gone.extend((str(n), chunk) for n, chunk in chunks)
            for key, work in gone:
                n = tries.get(key, 0) + 1
                if n > RETRIES or not left:
                    for job in [work] if isinstance(work, Job) else work:
                        report_done(Done(job.relative, job.size, error=f"no result from a worker in "
                                               f"{task_timeout:g} s (--task-timeout), {n} tries"), done, bar)
                    continue
                again = f"{key.partition('-late')[0]}-late{n}"
                tries[again] = n
                submit(work, again, hashlib.sha1(again.encode()).hexdigest())

        try:
            more()
            while futures:
                got = finished.next_batch(block=False)
                for future, value in got:
                    if futures.get(future) is None:  # given up on, done at last: run again already
                        continue
                    for result in settle(futures.pop(future), value):
                        if isinstance(result, Job):  # alone now, retried by Dask, then reported
                            digest = hashlib.sha1(result.source.encode()).hexdigest()
                            submit(result, f"translate-{os.getpid()}-alone-{digest}", digest)
                            continue
                        report_done(result, done, bar)
                        bar.update(result.size)
                if time.monotonic() - polled >= POLL:
                    polled = time.monotonic()
                    late(polled)
                more()  # as many as finished or were given up on
                if not got:
                    with finished.thread_condition:
                        finished.thread_condition.wait(0.1)
        except KeyboardInterrupt:
            client.cancel([*futures, *abandoned])
            return done, True
        client.cancel(abandoned)
    return done, False
