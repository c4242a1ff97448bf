"""A hung worker of the local pool never holds the batch (issue 41): one that gets on with nothing
for --task-timeout is killed, its chunk's files run again each alone, the other chunks it took
down run again as they were; a file that hangs again fails, named. Real SIGSTOPs, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

from support_fixtures import FIXTURES, events, fleet
from support_processes import TRANSLATOR, children, poll

from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.shell import batch, pool
from translator.shell.local_disk import LocalStore
from translator.shell.progress import Progress
from translator.shell.replay import Job


class Stopping(LocalStore):
    """Local disk, whose worker stops itself (SIGSTOP) on opening one file, the first time only."""

    def __init__(self, stop_on: str, once: Path) -> None:
        super().__init__()
        self.stop_on, self.once = stop_on, once

    def open_input(self, path: str) -> AbstractContextManager[BinaryIO]:
        if path.endswith(self.stop_on):
            try:
                os.close(os.open(self.once, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                self.once.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGSTOP)
        return super().open_input(path)


def test_a_stopped_worker_is_killed_and_every_file_still_translated(tmp_path: Path, bundled_rates: RateCard) -> None:
    src = fleet(tmp_path / "logs", 300)
    template = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates,
                   rates_digest=bundled_rates.fingerprint(), options=Options(), clock="auto")
    records = batch.prepare_out_dir(str(tmp_path / "out"))
    jobs = list(batch.planned([str(src)], LocalStore(), str(tmp_path / "out"), template))
    victim = sorted(jobs, key=lambda j: j.size)[len(jobs) // 2].source  # in a chunk of many
    started = time.monotonic()
    with Progress(0, len(jobs)) as bar:
        done, interrupted = pool.run_local(jobs, 2, bar, Stopping(victim, tmp_path / "stopped"), records,
                                           task_timeout=2)
    stopped = int((tmp_path / "stopped").read_text())
    assert not interrupted
    assert (done.files, done.translated, [d.error for d in done.failed]) == (300, 300, [])
    assert all(Path(j.target or "").is_file() for j in jobs)
    assert 2 <= time.monotonic() - started < 60
    assert not Path(f"/proc/{stopped}").exists()  # killed, and reaped
    again = batch.up_to_date(jobs, batch.prepare_out_dir(str(tmp_path / "out")))
    assert (len(again[0]), len(again[1])) == (0, 300)  # every file's record there, once


def opened(fifo: Path) -> int | None:
    """The FIFO's write end, once a reader has it open (never a wait: a test that waited hung)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None
    os.set_blocking(fd, True)
    return fd


def test_a_worker_stopped_on_a_read_that_never_returns_fails_its_file_alone(tmp_path: Path) -> None:
    """The installed command: a worker mid-file on a FIFO, SIGSTOPped (before, the batch waited
    for ever); killed after --task-timeout 2, the file tried alone once more (its read never
    returns: killed again), then named as failed, 74; the other file translated."""
    src, out = tmp_path / "logs", tmp_path / "out"
    src.mkdir()
    stuck = src / "stuck.ndjson"
    os.mkfifo(stuck)
    (src / "done.ndjson").write_bytes((FIXTURES / "thinking.events.jsonl").read_bytes())
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(out), "--jobs", "2", "--task-timeout", "2", str(stuck),
                             str(src / "done.ndjson")], stderr=subprocess.PIPE)
    with os.fdopen(poll(lambda: opened(stuck), 60), "wb") as writer:  # held open without the rest: the read waits
        writer.write(events("thinking")[:200])
        writer.flush()
        poll(lambda: list(out.glob(".stuck.*.tmp")), 60)
        [worker] = [pid for pid in children(proc.pid) if any(
            os.path.realpath(f"/proc/{pid}/fd/{fd}") == str(stuck) for fd in os.listdir(f"/proc/{pid}/fd"))]
        os.kill(worker, signal.SIGSTOP)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 74, err
    assert err.decode().splitlines()[-2:] == [
        err.decode().splitlines()[-2],
        "translator: failed: stuck.ndjson: no result from a worker in 2 s (--task-timeout)"]
    assert err.decode().splitlines()[-2].startswith("translator: 1 translated, 0 skipped (up to date), 1 failed")
    assert (out / "done.enriched.jsonl").exists() and not (out / "stuck.enriched.jsonl").exists()
    assert not Path(f"/proc/{worker}").exists() or "Z" in Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1][:3]
