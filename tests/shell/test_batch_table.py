"""--out-dir with --results-table does work in proportion to what changed (issue 41), through the
installed command: an unchanged rerun writes no table file, a rerun with one log touched writes
that log's rows alone, and a table made anew (or written while the records were made without it)
gets every row again from the records."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
from support_fixtures import FIXTURES
from support_processes import run

from translator.shell import ledger

LOG = FIXTURES / "tool_use_two_turns.events.jsonl"
pq = pytest.importorskip("pyarrow.parquet")


def batch(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run(*args, timeout=120)


def said(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.decode().strip().splitlines()[-1]


def fleet(tmp_path: Path, n: int = 10) -> Path:
    logs = tmp_path / "logs"
    for i in range(n):
        (logs / f"s{i}").mkdir(parents=True)
        shutil.copy(LOG, logs / f"s{i}" / "a.ndjson")
        os.utime(logs / f"s{i}" / "a.ndjson", (1764460800 - i * 86400,) * 2)  # ten days: ten partitions
    return logs


def files(table: Path) -> dict[str, tuple[int, int, int]]:
    """Every file of the table (hidden ones too), as it is on disk."""
    return {str(p.relative_to(table)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
            for p in table.rglob("*") if p.is_file()}


def rows(table: Path) -> dict[tuple[str, int], int]:
    """(source, run_index) -> the log's modification time as the table's current version holds it."""
    from deltalake import DeltaTable

    data = DeltaTable(str(table)).to_pyarrow_table(columns=["source", "run_index", "log_mtime"]).to_pylist()
    assert len({(r["source"], r["run_index"]) for r in data}) == len(data)  # no run twice
    return {(r["source"], r["run_index"]): int(r["log_mtime"].timestamp()) for r in data}


def test_an_unchanged_rerun_writes_no_table_file_and_a_touched_log_only_its_rows(tmp_path: Path) -> None:
    logs, out, table = fleet(tmp_path), tmp_path / "out", tmp_path / "table"
    command = ["--out-dir", str(out), "--results-table", str(table), str(logs)]
    assert said(batch(*command)).startswith("translator: 10 translated")
    first, before = files(table), rows(table)
    assert len(before) == 10 and len([p for p in first if p.endswith(".parquet")]) == 10
    assert said(batch(*command)).startswith("translator: 0 translated, 10 skipped")
    assert files(table) == first  # not one file of the table written: no commit
    os.utime(logs / "s3" / "a.ndjson", (1764460800 - 3 * 86400 + 60,) * 2)  # one log touched
    assert said(batch(*command)).startswith("translator: 1 translated, 9 skipped")
    now = files(table)
    changed = {name for name in now if now[name] != first.get(name)}
    # one commit (its day's merge): the log's next version and its partition's new file (the old one
    # stays, in no version now); the replay's was a commit a day
    version = len([n for n in first if n.startswith("_delta_log/") and n.endswith(".json")])
    assert {n.split("/part-")[0] if n.endswith(".parquet") else n for n in changed} == {
        "date=2025-11-27", f"_delta_log/{version:020d}.json"}, changed
    assert rows(table) == {**before, (str(logs / "s3" / "a.ndjson"), 0): 1764460800 - 3 * 86400 + 60}


def test_a_table_made_anew_or_another_gets_every_row_from_the_records(tmp_path: Path) -> None:
    logs, out, table = fleet(tmp_path), tmp_path / "out", tmp_path / "table"
    command = ["--out-dir", str(out), "--results-table", str(table), str(logs)]
    said(batch(*command))
    expected = rows(table)
    shutil.rmtree(table)
    assert said(batch(*command)).startswith("translator: 0 translated, 10 skipped")
    assert rows(table) == expected
    other = tmp_path / "other"
    assert said(batch("--out-dir", str(out), "--results-table", str(other), str(logs))).startswith("translator: 0 translated")
    assert rows(other) == expected
    assert len(list((out / ".translator.done").glob("table-*"))) == 2  # a mark per table


def test_a_log_made_again_without_the_table_has_its_new_rows_written_next(tmp_path: Path) -> None:
    """Its latest record is after the table's mark: read and written, though up to date."""
    logs, out, table = fleet(tmp_path, 3), tmp_path / "out", tmp_path / "table"
    command = ["--out-dir", str(out), "--results-table", str(table), str(logs)]
    said(batch(*command))
    os.utime(logs / "s1" / "a.ndjson", (1764460800 - 86400 + 5,) * 2)
    assert said(batch("--out-dir", str(out), str(logs))).startswith("translator: 1 translated")
    assert said(batch(*command)).startswith("translator: 0 translated, 3 skipped")
    assert rows(table)[(str(logs / "s1" / "a.ndjson"), 0)] == 1764460800 - 86400 + 5


def test_a_mark_holds_its_runs_records_and_those_before_only() -> None:
    """A later run of the same pid (a container's) commits after the mark: not held."""
    held = ledger.Tabled(before=100, pid=7, until=200)
    name = f"{ledger.FOLDER}/{{:020d}}-{{}}-000000.done".format
    assert [held.holds(name(g, p)) for g, p in [(99, 8), (100, 8), (150, 7), (200, 7), (201, 7)]] == \
        [True, False, True, True, False]
    mark = ledger.mark("/t", "id1", ledger.Ledger("f", 100, 7), 200)
    assert ledger.tabled(mark, "/t", "id1") == held
    assert [ledger.tabled(mark, "/t", "id2"), ledger.tabled(mark, "/u", "id1"), ledger.tabled(mark, "/t", None),
            ledger.tabled(b"{", "/t", "id1"), ledger.tabled(orjson.dumps({"table": "/t", "id": "id1"}), "/t", "id1")] == \
        [None] * 5


def test_rows_are_checked_against_the_table_only_when_one_is_written(tmp_path: Path) -> None:
    """A record's rows that no table can hold: no table, no look at them (up to date); a table
    that does not hold them yet, its file made again."""
    logs, out = fleet(tmp_path, 1), tmp_path / "out"
    said(batch("--out-dir", str(out), str(logs)))
    [record] = (out / ".translator.done").glob("*.done")
    head, line, *rest = record.read_bytes().split(b"\n")
    record.write_bytes(b"\n".join([head, orjson.dumps({**orjson.loads(line), "results": [7]}), *rest]))
    assert said(batch("--out-dir", str(out), str(logs))).startswith("translator: 0 translated, 1 skipped")
    table = tmp_path / "table"
    assert said(batch("--out-dir", str(out), "--results-table", str(table), str(logs))).startswith("translator: 1 translated")
    assert len(rows(table)) == 1
