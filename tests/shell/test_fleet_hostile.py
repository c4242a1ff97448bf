"""The batch on a Dask cluster in a hostile world (issue 32), on a real one: a scheduler and two
workers started by Dask's own command (`dask scheduler`, `dask worker`) in a folder of their
own, as on another machine; the batch through the installed command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import fleet
from support_processes import TRANSLATOR, poll

pytestmark = pytest.mark.slow
DASK = str(Path(sys.executable).with_name("dask"))


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[int], Path]]:
    """The scheduler's address, its workers' pids, and the folder they run in."""
    from distributed import Client

    home = tmp_path_factory.mktemp("cluster")
    address = home / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": home}
    started = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                 "--scheduler-file", str(address)], **quiet)]  # type: ignore[call-overload]
    poll(address.exists, 60)
    started.append(subprocess.Popen([DASK, "worker", "--scheduler-file", str(address), "--nworkers", "2",
                                     "--nthreads", "1", "--no-dashboard"], **quiet))  # type: ignore[call-overload]
    try:
        with Client(scheduler_file=str(address), timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            yield client.scheduler.address, list(client.run(os.getpid).values()), home
    finally:
        for proc in reversed(started):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def translate(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, *args], capture_output=True, timeout=timeout, cwd=cwd)


def outputs(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.jsonl")}


def test_relative_folders_are_the_clients_not_the_workers(scheduler: Any, tmp_path: Path) -> None:
    """`--out-dir out` (and `--transcripts t`) name the client's folders: it was "10 translated",
    exit 0, and every output in the workers' working directory; the rerun is up to date."""
    address, _, home = scheduler
    fleet(tmp_path / "logs", 10)
    proc = translate("--out-dir", "out", "--transcripts", "t", "--cluster", address, "logs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    want = translate("--out-dir", "want", "--transcripts", "t-want", "logs", cwd=tmp_path)
    assert want.returncode == 0
    assert outputs(tmp_path / "out") == outputs(tmp_path / "want") and len(outputs(tmp_path / "out")) == 10
    assert outputs(tmp_path / "t") == outputs(tmp_path / "t-want") and outputs(tmp_path / "t")
    assert not (home / "out").exists() and not (home / "t").exists()
    again = translate("--out-dir", "out", "--transcripts", "t", "--cluster", address, "logs", cwd=tmp_path)
    assert b"translator: 0 translated, 10 skipped (up to date)" in again.stderr, again.stderr


@pytest.mark.parametrize("stopped", [1, 2])
def test_a_stopped_worker_is_given_up_on_at_the_task_timeout(scheduler: Any, tmp_path: Path, stopped: int) -> None:
    """A worker stopped (SIGSTOP) before the batch, so that the scheduler, which still counts
    it, sends it tasks: at --task-timeout they run on the other worker, and the batch ends whole
    (it waited for ever: 38/40 done); with both stopped, no worker is left, and the files fail (74)."""
    address, pids, _ = scheduler
    fleet(tmp_path / "logs", 40)
    want = translate("--out-dir", "want", "logs", cwd=tmp_path)
    for pid in pids[:stopped]:
        os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        proc = translate("--out-dir", "out", "--cluster", address, "--task-timeout", "3", "logs", cwd=tmp_path)
        took = time.monotonic() - started
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    said = proc.stderr.decode()
    if stopped == 1:
        assert proc.returncode == 0, said
        assert "translator: 40 translated, 0 skipped (up to date), 0 failed" in said
        assert outputs(tmp_path / "out") == outputs(tmp_path / "want")
    else:
        assert proc.returncode == 74, said
        assert "translator: 0 translated, 0 skipped (up to date), 40 failed" in said
        assert said.count("no result from a worker in 3 s (--task-timeout), 1 tries") == 40
    assert took < 60, took
    assert want.returncode == 0
