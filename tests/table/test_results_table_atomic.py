"""--results-table is never left worse than before: a writer killed (SIGKILL) at the moment its
new files begin to appear leaves the table it found, whole, or the new one (the old logs' rows
kept beside the new ones): a Delta commit is one put of the log's next version; and a batch's
rows of a day are one file, in row groups of many runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES
from support_processes import TRANSLATOR, run

pytestmark = pytest.mark.slow
DAY = 1764460800  # 2025-11-30, every log's modification day: one partition
RUN = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes()  # one run


def logs(root: Path, files: int, runs: int) -> Path:
    root.mkdir(parents=True)
    for n in range(files):
        (root / f"s{n}.ndjson").write_bytes(RUN * runs)
        os.utime(root / f"s{n}.ndjson", (DAY, DAY))
    return root


def rows(table: Path) -> list[dict[str, Any]]:
    """The table's current version as DuckDB reads it (over its Arrow dataset, docs/fleet.md's
    way) and as pyarrow does: the same rows."""
    import duckdb
    from deltalake import DeltaTable

    runs = DeltaTable(str(table)).to_pyarrow_dataset()
    db = duckdb.connect()
    db.register("runs", runs)
    found = db.execute("select source, run_index, date from runs order by source, run_index").fetchall()
    arrow = runs.to_table(columns=["source", "run_index", "date"]).to_pylist()
    assert sorted((r["source"], r["run_index"], r["date"]) for r in arrow) == [(s, i, str(d)) for s, i, d in found]
    return [{"source": s, "run_index": i} for s, i, _ in found]


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    try:
        return {e.name: (e.inode(), e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder)}
    except FileNotFoundError:
        return {}


def test_a_writer_killed_while_it_writes_a_partition_leaves_the_old_table_whole(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    table, partition = tmp_path / "table", tmp_path / "table" / "date=2025-11-30"
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the writers stage their rows
    old = logs(tmp_path / "old", 2, 30)
    assert run("--results-table", str(table), str(old), timeout=120).returncode == 0
    before = rows(table)
    assert len(before) == 60
    new = logs(tmp_path / "new", 4, 1500)
    kills = 0
    for _ in range(3):  # three tries at catching the first new file of the partition
        seen = snapshot(partition)
        proc = subprocess.Popen([TRANSLATOR, "--results-table", str(table), str(new)],
                                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and snapshot(partition) == seen:
            assert time.monotonic() < deadline
        proc.send_signal(signal.SIGKILL)
        status = proc.wait()
        kills += status == -signal.SIGKILL
        after = rows(table)
        assert after == before or (len(after) == 6060 and {r["source"] for r in after} == {  # the old logs' kept
            str(new / f"s{n}.ndjson") for n in range(4)} | {r["source"] for r in before}), (status, len(after))
        if after != before:  # the commit came before the kill: the new table, whole
            break
    assert kills

    done = run("--results-table", str(table), str(new), timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(rows(table)) == 6060
    assert not list((tmp_path / "tmp").iterdir())  # the killed writers' staging folders swept


def test_a_batchs_day_is_one_file_of_row_groups_of_many_runs(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = tmp_path / "table"
    proc = run("--results-table", str(table), str(logs(tmp_path / "logs", 40, 50)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    parts = list(table.rglob("*.parquet"))
    assert [p.relative_to(table).parent.as_posix() for p in parts] == ["date=2025-11-30"]
    meta = pq.ParquetFile(parts[0]).metadata
    assert (meta.num_rows, meta.num_row_groups) == (2000, 1)
    assert "date" not in meta.schema.names  # the partition's value is in its path, as hive has it
