"""Which Dask workers hold a batch's task past its deadline (`--task-timeout`).

A worker that stops (SIGSTOP, a hung disk, a read that never returns) keeps the tasks sent to it:
the scheduler sends no more while its slots are full, and drops it only when its heartbeats stop
for the cluster's `worker-ttl` (5 minutes by default; not at all if that is off, nor while a
worker that is alive runs a task that never ends). A batch of 40 files ended 38 done, then
waited. So the client watches the scheduler's `processing` (the tasks sent to each worker): a
worker that holds tasks of the batch and finishes none of them for the deadline is given up on,
and its tasks run again on the others. The deadline counts from when the worker last finished
one of them (or first got one), not from each task's submission, which says nothing of when it
started. Pure: the snapshots and the time are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TASK_TIMEOUT = 300.0  # seconds: Dask's own worker-ttl, the time a cluster gives a silent worker


class Stalls:
    """Per worker, the batch's tasks it holds and since when it has finished none of them."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.held: dict[str, set[str]] = {}
        self.since: dict[str, float] = {}

    def stuck(self, processing: Mapping[str, Iterable[object]], ours: set[str], now: float) -> dict[str, set[str]]:
        """The workers past the deadline, each with the batch's tasks it holds (`processing`: the
        scheduler's, every client's tasks; `ours`: the keys of the tasks still awaited)."""
        late: dict[str, set[str]] = {}
        for worker in list(self.held):
            if worker not in processing:
                del self.held[worker], self.since[worker]
        for worker, keys in processing.items():
            mine = {key for key in keys if isinstance(key, str) and key in ours}
            before = self.held.pop(worker, set())
            if not mine:
                self.since.pop(worker, None)
                continue
            if not before or before - mine:  # it got its first, or finished one
                self.since[worker] = now
            self.held[worker] = mine
            if now - self.since[worker] >= self.deadline:
                late[worker] = mine
        return late
