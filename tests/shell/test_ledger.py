"""The up-to-date records of an output directory (shell/ledger.py): a file's latest record
decides, a head with no entry after it means "made again", dead records are found; and the
crash window the per-file markers had (an output replaced, its new marker not yet written, the
old one still claiming it) is closed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
from support_fixtures import fleet

from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.shell import batch, ledger
from translator.shell.local_disk import LocalStore
from translator.shell.replay import Job, translate_many

FOLDER = "out/.translator.done"


def name(generation: int, chunk: int | str = 0, pid: int = 7) -> str:
    return ledger.Ledger(FOLDER, generation, pid).path(chunk)


def record(files: list[str], *entries: tuple[str, str]) -> bytes:
    return ledger.head(files) + ledger.entries((f, key, f"/logs/{f}", [{"source": f, "run_index": 0}]) for f, key in entries)


def test_the_latest_record_of_a_file_decides() -> None:
    old, new, alone = name(10), name(20), name(20, "ab12")
    found = ledger.read(FOLDER, {
        new: record(["a", "b", "c"], ("a", "k2")),  # b, c: committed, then stopped before their entries
        old: record(["a", "b", "d"], ("a", "k1"), ("b", "k1"), ("d", "k1")),
        alone: record(["c"], ("c", "k3")),  # c retried alone after its chunk, in the same run
    }, now_ns=30, pid=8, outputs=None)
    assert found.latest == {"a": ledger.Entry("k2", "/logs/a", new), "b": None,
                            "c": ledger.Entry("k3", "/logs/c", alone), "d": ledger.Entry("k1", "/logs/d", old)}
    assert found.dead == [] and found.generation == 30
    assert found.recorded("a", "out/a.x", lambda: "k2")
    assert not found.recorded("a", "out/a.x", lambda: "k1")  # another key: made again
    assert not found.recorded("b", "out/b.x", lambda: "k1")  # the older entry does not count
    # the rows of the files asked for, read again from their latest records (none for b: no entry)
    assert sorted(r[0]["source"] for r in found.rows({"a", "b", "d"})) == ["a", "d"]
    assert found.path(3) == f"{FOLDER}/{30:020d}-8-000003.done"


def test_a_record_no_file_needs_is_dead_and_damage_is_not_trusted() -> None:
    old, new = name(10), name(20)
    cut = record(["a", "b"], ("a", "k2"), ("b", "k2"))[:-9]  # the last entry cut short
    found = ledger.read(FOLDER, {old: record(["a", "b"], ("a", "k1"), ("b", "k1")), new: cut + b"\n" + b"[1]\n"},
                        now_ns=5, pid=8, outputs={"out/a.x"})
    assert found.latest == {"a": ledger.Entry("k2", "/logs/a", new), "b": None}
    assert found.dead == [old] and found.generation == 21  # the clock went back: after the latest
    assert found.recorded("a", "out/a.x", lambda: "k2")
    assert not found.recorded("a", "out/gone.x", lambda: "k2")  # its output is not there
    stray = record(["a"], ("z", "k9"))  # an entry its head does not name
    assert ledger.read(FOLDER, {new: stray, old: b'{"files": [tru'}, 0, 8, None).latest == {"a": None}


def test_an_output_replaced_without_its_entry_is_made_again(tmp_path: Path, bundled_rates: RateCard) -> None:
    """Run 1 makes every file under one set of options; run 2, under others, commits its
    outputs and stops before their entries; run 3, under run 1's options, must not take run
    1's entries for the files on disk (they are run 2's)."""
    src, out = fleet(tmp_path / "logs", 6), tmp_path / "out"
    template = Job(format="enriched", partial=False, results_only=False, rates=bundled_rates,
                   rates_digest=bundled_rates.fingerprint(), options=Options(), clock="auto")
    jobs = list(batch.planned([str(src)], LocalStore(), str(out), template))
    assert all(d.error is None for d in translate_many(jobs, LocalStore(), record=batch.prepare_out_dir(str(out)).path(0)))
    assert batch.up_to_date(jobs, batch.prepare_out_dir(str(out)))[0] == []

    class Stopped(LocalStore):
        def close_record(self, record: str, head: bytes, tail: bytes) -> None:
            pass  # killed after the renames, before the entries

    other = [replace(job, results_only=True) for job in jobs]
    first = {job.target: Path(job.target or "").read_bytes() for job in jobs}
    assert all(d.error is None for d in translate_many(other[:4], Stopped(), record=batch.prepare_out_dir(str(out)).path(0)))
    assert [Path(job.target or "").read_bytes() != first[job.target] for job in jobs] == [True] * 4 + [False] * 2
    todo, skipped = batch.up_to_date(jobs, batch.prepare_out_dir(str(out)))
    assert todo == jobs[:4] and [d.relative for d in skipped] == [job.relative for job in jobs[4:]]
    records = sorted((out / ledger.FOLDER).glob("*.done"))
    assert len(records) == 2 and orjson.loads(records[1].read_bytes().splitlines()[0])["files"] == [j.relative for j in jobs[:4]]


def test_an_output_is_owned_by_the_log_its_latest_entry_names() -> None:
    found = ledger.read(FOLDER, {name(10): record(["a", "b"], ("a", "k1")),
                                 name(20): b'{"files":["c"]}\n{"file":"c","key":"k1","results":[]}\n'},  # an earlier version's
                        now_ns=30, pid=8, outputs={"out/a.x", "out/c.x"})
    assert found.owner("a", "out/a.x") == "/logs/a"
    assert found.owner("a", "out/gone.x") is None  # its output is not there: nothing to replace
    assert found.owner("b", "out/b.x") is None  # a head, no entry: unknown
    assert found.owner("c", "out/c.x") is None  # no source recorded: unknown


def test_records_are_read_when_looked_up_a_batch_at_a_time() -> None:
    paths = [name(g) for g in range(1, 200)]
    fetched: list[list[str]] = []

    def fetch(batch: list[str]) -> dict[str, bytes]:
        fetched.append(batch)
        return {p: record([p[-30:]], (p[-30:], "k")) for p in batch}

    found = ledger.read(FOLDER, ledger.Lazy(paths[::-1], fetch), now_ns=0, pid=8, outputs=None)
    assert len(found.latest) == 199 and [len(b) for b in fetched] == [64, 64, 64, 7]  # in order, never all at once
    assert fetched[0][0] == paths[0]


def test_a_job_for_a_file_is_its_template_with_that_file(bundled_rates: RateCard) -> None:
    template = Job("claude-code", True, True, bundled_rates, "d", Options(), "wall", force=True,
                   transcripts="/t", telemetry=(("A", "1"),))
    made = template.of("/s/a.ndjson", "a.ndjson", 7, 1.5, "/o/a.claude-code.jsonl")
    assert made == replace(template, source="/s/a.ndjson", relative="a.ndjson", size=7, mtime=1.5,
                           target="/o/a.claude-code.jsonl")
