"""A batch's scheduling is linear: tasks are chunks of files, a bounded window of them in flight,
counted on the real process pool, in-process (a count, not a timing)."""

from __future__ import annotations

from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_fixtures import fleet

from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.shell import batch, ledger, pool
from translator.shell.local_disk import LocalStore
from translator.shell.outcomes import Outcomes
from translator.shell.packing import CHUNK_FILES, pack
from translator.shell.progress import Progress
from translator.shell.replay import Job, shown, translate_many


class Counting(ProcessPoolExecutor):
    """The real pool, counting the tasks submitted and the most ever in flight."""

    submitted = 0
    most = 0
    _open = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        cls = type(self)
        cls.submitted += 1
        cls._open += 1
        cls.most = max(cls.most, cls._open)
        future.add_done_callback(lambda _: setattr(cls, "_open", cls._open - 1))
        return future


def scheduled(tmp_path: Path, files: int, workers: int, monkeypatch: pytest.MonkeyPatch,
              bundled_rates: RateCard) -> tuple[list[Job], Outcomes]:
    src = fleet(tmp_path / f"logs-{files}", files)
    template = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates,
                   rates_digest=bundled_rates.fingerprint(), options=Options(), clock="auto")
    jobs = list(batch.planned([str(src)], LocalStore(), str(tmp_path / f"out-{files}"), template))
    Counting.submitted = Counting.most = Counting._open = 0
    monkeypatch.setattr(pool, "ProcessPoolExecutor", Counting)
    with Progress(0, len(jobs)) as bar:
        done, interrupted = pool.run_local(jobs, workers, bar)
    assert not interrupted
    return jobs, done


def test_tasks_are_chunks_of_files_and_only_a_window_of_them_is_in_flight(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bundled_rates: RateCard) -> None:
    counts = {}
    for files in (400, 1600):
        jobs, done = scheduled(tmp_path, files, 2, monkeypatch, bundled_rates)
        assert (done.files, done.translated, done.failed) == (len(jobs), len(jobs), [])
        assert all(Path(j.target or "").is_file() for j in jobs)
        assert Counting.submitted == len(list(pack(jobs, 2)))
        assert Counting.most <= pool.WINDOW * 2  # never a wait over everything pending
        counts[files] = Counting.submitted
    # 4x the files, 4x the tasks (a chunk's worth either way), far fewer tasks than files.
    assert counts[1600] <= 4 * counts[400] + 1 and counts[1600] <= 1600 // CHUNK_FILES + 8 * 2 + 1


def test_packing_puts_every_file_in_one_chunk_largest_first(bundled_rates: RateCard) -> None:
    template = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates, rates_digest="",
                   options=Options(), clock="auto")
    sizes = [3000] * 999 + [50 << 20]
    jobs = [replace(template, relative=f"s{n}", size=size) for n, size in enumerate(sizes)]
    chunks = list(pack(jobs, 2))
    assert sorted(j.relative for c in chunks for j in c) == sorted(j.relative for j in jobs)
    assert [j.size for j in chunks[0]] == [50 << 20]  # the huge one alone, first
    assert all(len(c) <= CHUNK_FILES for c in chunks) and len(chunks) <= 1000 // CHUNK_FILES + 2
    assert list(pack([], 2)) == []


def test_the_up_to_date_check_starts_from_one_walk_of_the_output(tmp_path: Path, bundled_rates: RateCard) -> None:
    """The walk of the output finds its records (one file per chunk, not a marker per file) and
    its outputs: a file recorded under this run's key, its output there, is up to date without
    a worker reading anything; one whose output was removed is made again."""
    src, out = fleet(tmp_path / "logs", 20), tmp_path / "out"
    template = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates,
                   rates_digest=bundled_rates.fingerprint(), options=Options(), clock="auto")
    records = batch.prepare_out_dir(str(out))
    jobs = list(batch.planned([str(src)], LocalStore(), str(out), template))
    assert batch.up_to_date(jobs, records) == (jobs, [])  # a fresh output: nothing recorded
    chunks = list(pack(jobs, 2))
    done = [d for n, chunk in enumerate(chunks) for d in translate_many(chunk, LocalStore(), record=records.path(n))]
    assert all(d.error is None and not d.skipped for d in done)
    assert len(list((out / ledger.FOLDER).glob("*.done"))) == len(chunks) < len(jobs)
    assert not [p for p in out.rglob(".*") if p.parent.name != ledger.FOLDER and p.name != ledger.FOLDER]
    Path(jobs[3].target or "").unlink()
    todo, skipped = batch.up_to_date(jobs, batch.prepare_out_dir(str(out)))
    assert todo == [jobs[3]] and len(skipped) == 19 and all(d.skipped for d in skipped)
    by_file = {shown(d.relative): d.results for d in done}
    assert all(not d.results for d in skipped)  # the rows stay in the records, read again for a table
    again = [rows for rows in batch.prepare_out_dir(str(out)).rows({shown(d.relative) for d in skipped})]
    assert sorted(map(orjson.dumps, again)) == sorted(orjson.dumps(by_file[shown(d.relative)]) for d in skipped)
    forced = batch.up_to_date([replace(job, force=True) for job in jobs], batch.prepare_out_dir(str(out)))
    assert len(forced[0]) == 20 and forced[1] == []
