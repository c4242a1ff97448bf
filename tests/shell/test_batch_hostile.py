"""--out-dir against a hostile world (issue 32), through the installed command: a folder of the
user's own files, records and temporaries named to overflow, trees with links, overlapping runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
from support_fixtures import FIXTURES
from support_processes import TRANSLATOR, poll, run

LOG = FIXTURES / "tool_use_two_turns.events.jsonl"


def batch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    if cwd is None:
        return run(*args, timeout=120)
    return subprocess.run([TRANSLATOR, *args], capture_output=True, timeout=120, cwd=cwd)


def said(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode().strip().splitlines()[-1]


def records(out: Path) -> list[str]:
    return sorted(p.name for p in (out / ".translator.done").iterdir() if p.name.endswith(".done"))


def test_the_sweep_removes_only_what_a_run_can_have_made(tmp_path: Path) -> None:
    """Names that merely look like a temporary or an old marker are the user's; a temporary of an
    output whose writer is gone is ours; a pid no system gives is no writer's (was OverflowError, 70)."""
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG, tmp_path / "logs" / "a.ndjson")
    out = tmp_path / "out"
    out.mkdir()
    mine = {".budget.2024.tmp": b"b", ".draft.20240101.tmp": b"d", "notes.jsonl": b"n", ".notes.jsonl.done": b"m",
            ".x.99999999999999999999.tmp": b"x", ".a.enriched.jsonl.99999999999999999999.tmp": b"y"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    (out / ".a.enriched.jsonl.4000000.tmp").write_bytes(b"a killed writer's")  # no such process here
    for _ in range(2):
        proc = batch("--out-dir", str(out), str(tmp_path / "logs"))
        assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == {
        **mine, "a.enriched.jsonl": (out / "a.enriched.jsonl").read_bytes()}
    assert said(proc).startswith("translator: 0 translated, 1 skipped (up to date)")


def test_a_record_dated_far_ahead_still_has_records_after_it(tmp_path: Path) -> None:
    """A record named for the year 5138 (a clock far ahead): the next run's records are dated
    after it (21 digits) and read as records; before, the reader refused them and the file was
    made again on every run."""
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "a.ndjson"
    shutil.copy(LOG, log)
    out = tmp_path / "out"
    assert batch("--out-dir", str(out), str(log)).returncode == 0
    [name] = records(out)
    first = out / ".translator.done" / name
    first.rename(first.with_name(f"{10**20 - 1}-1-000000.done"))
    os.utime(log, (1, 1))  # changed: made again once, under a record after the far one
    assert said(batch("--out-dir", str(out), str(log))).startswith("translator: 1 translated")
    assert records(out)[0].startswith(f"{10**20}-")
    for _ in range(2):
        assert said(batch("--out-dir", str(out), str(log))).startswith("translator: 0 translated, 1 skipped")
    assert len(records(out)) == 1  # the far record was no file's latest any more: removed


def test_an_entry_whose_rows_are_not_rows_is_no_entry(tmp_path: Path) -> None:
    """A record entry with the right key and rows the table cannot hold (a missing source, a
    cost as text): its file is made again, and the table written (was 70 on every run until
    --force). (A table that holds the file's rows already, by its mark, keeps them: the record's
    are not read; each round here writes a table of its own.)"""
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG, tmp_path / "logs" / "a.ndjson")
    out, table = tmp_path / "out", str(tmp_path / "results")
    assert batch("--out-dir", str(out), "--results-table", table, str(tmp_path / "logs")).returncode == 0
    path = out / ".translator.done" / records(out)[0]
    head, line, *rest = path.read_bytes().split(b"\n")
    good = orjson.loads(line)
    for n, bad in enumerate(([{"run_index": 0}], [{**good["results"][0], "total_cost_usd": "lots"}], [7], "rows")):
        path = out / ".translator.done" / records(out)[-1]  # the latest (the one before it, dead, goes next run)
        path.write_bytes(b"\n".join([head, orjson.dumps({**good, "results": bad}), *rest]))
        table = str(tmp_path / f"results{n}")
        proc = batch("--out-dir", str(out), "--results-table", table, str(tmp_path / "logs"))
        assert (proc.returncode, said(proc)[:27]) == (0, "translator: 1 translated, 0"), (bad, proc.stderr)
    proc = batch("--out-dir", str(out), "--results-table", table, str(tmp_path / "logs"))
    assert (proc.returncode, said(proc)[:36]) == (0, "translator: 0 translated, 1 skipped "), proc.stderr


def outputs(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))


def test_a_walk_or_glob_follows_no_folder_link_and_reads_each_file_once(tmp_path: Path) -> None:
    """Two links to `..` in the tree (a quoted `**` glob went round them for ever; one link made
    one log 41 outputs and 41 table rows), and a link to a log of the tree (one output, by the
    name that is no link)."""
    import pyarrow.parquet as pq

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    shutil.copy(LOG, tree / "sub" / "a.ndjson")
    (tree / "sub" / "up").symlink_to("..")
    (tree / "sub" / "up2").symlink_to("..")
    (tree / "latest.ndjson").symlink_to("sub/a.ndjson")
    for n, names in enumerate([[f"{tree}/**/*.ndjson"], [str(tree)], [str(tree), f"{tree}/**/*.ndjson"]]):
        out, table = tmp_path / f"out{n}", tmp_path / f"table{n}"
        proc = batch("--out-dir", str(out), "--results-table", str(table), *names)
        assert (proc.returncode, said(proc)[:42]) == (0, "translator: 1 translated, 0 skipped (up to"), proc.stderr
        assert outputs(out) == ["sub/a.enriched.jsonl"]
        assert pq.read_table(table).column("source").to_pylist() == [str(tree / "sub" / "a.ndjson")]


def test_a_link_loop_is_one_bad_input(tmp_path: Path) -> None:
    """`loop.ndjson -> loop.ndjson` beside a good log: the good one is translated, the loop named
    and failed (74), in a walk and in a glob alike (it failed the whole batch, 70)."""
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG, tmp_path / "logs" / "good.ndjson")
    (tmp_path / "logs" / "loop.ndjson").symlink_to("loop.ndjson")
    for n, name in enumerate([str(tmp_path / "logs"), f"{tmp_path}/logs/*.ndjson"]):
        proc = batch("--out-dir", str(tmp_path / f"out{n}"), name)
        assert proc.returncode == 74, proc.stderr
        summary, failed = proc.stderr.decode().splitlines()[-2:]
        assert summary.startswith("translator: 1 translated, 0 skipped (up to date), 1 failed;"), proc.stderr
        assert failed == "translator: failed: loop.ndjson: Too many levels of symbolic links"
        assert outputs(tmp_path / f"out{n}") == ["good.enriched.jsonl"]


@pytest.mark.parametrize("change", ["options", "input"])
def test_overlapping_runs_leave_the_latest_commit_the_latest_record(tmp_path: Path, change: str) -> None:
    """Run A starts first and commits last (its chunk of b7 waits on a FIFO); run B, on the same
    folder, commits b7 in between, with `--results-only` or after b7 was replaced. B again must
    not find A's output "up to date": the latest commit (A's) has the latest record. Before, records
    were ordered by their run's start, and B's rerun kept A's output for ever."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in range(1, 8):
        shutil.copy(LOG, logs / f"b{n}.ndjson")
    os.mkfifo(logs / "fifo.ndjson")
    out, b7 = tmp_path / "out", logs / "b7.ndjson"
    # 8 files, one worker: 4 chunks a slot, so b7 (the last of the same size) shares the FIFO's.
    a = subprocess.Popen([TRANSLATOR, "--out-dir", str(out), "--jobs", "1", *(str(logs / f"b{n}.ndjson") for n in range(1, 8)),
                          str(logs / "fifo.ndjson")], stderr=subprocess.PIPE)
    poll(lambda: (out / "b6.enriched.jsonl").exists(), 60)
    options = ["--results-only"] if change == "options" else []
    if change == "input":
        b7.write_bytes(LOG.read_bytes() + LOG.read_bytes())
    assert batch("--out-dir", str(out), *options, str(b7)).returncode == 0
    with open(logs / "fifo.ndjson", "wb") as fifo:
        fifo.write(LOG.read_bytes())
    assert a.wait(60) == 0, a.stderr
    a.stderr.close()  # type: ignore[union-attr]
    assert batch("--out-dir", str(tmp_path / "want"), *options, str(b7)).returncode == 0
    proc = batch("--out-dir", str(out), *options, str(b7))
    assert said(proc).startswith("translator: 1 translated, 0 skipped"), proc.stderr
    assert (out / "b7.enriched.jsonl").read_bytes() == (tmp_path / "want" / "b7.enriched.jsonl").read_bytes()
    assert said(batch("--out-dir", str(out), *options, str(b7))).startswith("translator: 0 translated, 1 skipped")


def test_a_temporary_of_a_zombie_writer_is_removed(tmp_path: Path) -> None:
    """A killed batch's workers are zombies until reaped (an init can be slow): a rerun at once
    kept their temporaries as a live writer's."""
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG, tmp_path / "logs" / "a.ndjson")
    zombie = subprocess.Popen(["true"])
    poll(lambda: Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z", 10)
    (tmp_path / "out").mkdir()
    stale = tmp_path / "out" / f".a.enriched.jsonl.{zombie.pid}.tmp"
    stale.write_bytes(b"half")
    try:
        assert batch("--out-dir", str(tmp_path / "out"), str(tmp_path / "logs")).returncode == 0
        assert not stale.exists()
    finally:
        zombie.wait()
