"""The results table's writer, a process of its own, through the installed command: the batch's
process never loads pyarrow or delta-rs (their ~100 MiB and a merge's buffers are the writer's),
and the writer's merges, a day's partition each, keep one row per run when a batch's logs change
days or lose runs (the table's rows of another day found and deleted, every other row kept)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import DAY, RUN, host
from support_processes import TRANSLATOR, run

pytestmark = pytest.mark.slow


def rows(table: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    found = DeltaTable(str(table)).to_pyarrow_table(columns=["source", "run_index", "date"]).to_pylist()
    return sorted(found, key=lambda r: (r["source"], r["run_index"]))


def imported(stderr: bytes) -> set[str]:
    """The modules `python -X importtime` says its process imported (its lines alone: the
    writer, another process, is started without it)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.decode().splitlines() if line.startswith("import time:")}


def test_the_batch_never_loads_pyarrow_or_deltalake_and_its_writer_writes_the_table(tmp_path: Path) -> None:
    logs, out, table = host(tmp_path / "logs", 3), tmp_path / "out", tmp_path / "table"
    for args in (["--out-dir", str(out)], ["--out-dir", str(out), "--force"], []):  # (identity, then the write)
        proc = subprocess.run([sys.executable, "-X", "importtime", TRANSLATOR, *args, "--results-table", str(table),
                               str(logs)], capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        modules = imported(proc.stderr)
        assert "translator.shell.batch" in modules  # (the batch's own lines are there)
        assert not {m for m in modules if m.split(".")[0] in ("pyarrow", "deltalake")}, sorted(modules)
        assert len(rows(table)) == 6


def test_logs_that_change_day_or_lose_runs_keep_one_row_per_run(tmp_path: Path) -> None:
    day = 86400
    a, b = host(tmp_path / "a", 2, day=DAY), host(tmp_path / "b", 2, day=DAY - 3 * day)
    out, table = tmp_path / "out", tmp_path / "table"
    command = ["--out-dir", str(out), "--results-table", str(table), str(a), str(b)]
    assert run(*command, timeout=120).returncode == 0
    assert {(r["date"], len([s for s in rows(table) if s["date"] == r["date"]])) for r in rows(table)} == {
        ("2025-11-30", 4), ("2025-11-27", 4)}
    os.utime(a / "run-0" / "stdout.ndjson", (DAY - 10 * day,) * 2)  # its runs now of 2025-11-20
    (b / "run-1" / "stdout.ndjson").write_bytes(RUN)  # one run now, not two
    os.utime(b / "run-1" / "stdout.ndjson", (DAY - 3 * day,) * 2)
    proc = run(*command, timeout=120)
    assert proc.returncode == 0 and b"2 translated, 2 skipped" in proc.stderr, proc.stderr
    expected = [(str(a / "run-0" / "stdout.ndjson"), 0, "2025-11-20"), (str(a / "run-0" / "stdout.ndjson"), 1, "2025-11-20"),
                (str(a / "run-1" / "stdout.ndjson"), 0, "2025-11-30"), (str(a / "run-1" / "stdout.ndjson"), 1, "2025-11-30"),
                (str(b / "run-0" / "stdout.ndjson"), 0, "2025-11-27"), (str(b / "run-0" / "stdout.ndjson"), 1, "2025-11-27"),
                (str(b / "run-1" / "stdout.ndjson"), 0, "2025-11-27")]
    assert [(r["source"], r["run_index"], r["date"]) for r in rows(table)] == expected
