"""A results table holds what it was told: runs over other logs accumulate, a rerun of the same
logs replaces their rows (wherever they were) and doubles nothing (two writers at once:
test_delta_table.py); a session id is the log's own (of its full path), and an output of
one log is never silently replaced by another's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import DAY, RUN, host
from support_processes import run

from translator.encoders.observed import session_id_of as session_id

pytestmark = pytest.mark.slow


def rows(table: Path) -> list[dict[str, Any]]:
    """Every row of the table's current version as DuckDB reads it (over its Arrow dataset, as
    docs/fleet.md has it), in (source, run_index) order."""
    import duckdb
    from deltalake import DeltaTable

    runs = DeltaTable(str(table)).to_pyarrow_dataset()
    db = duckdb.connect()
    db.register("runs", runs)
    found = db.execute("select * from runs order by source, run_index").fetchall()
    names = [d[0] for d in db.description]
    return [dict(zip(names, r, strict=True)) for r in found]


def keys(table: Path) -> list[tuple[str, int, str]]:
    return [(r["source"], r["run_index"], str(r["date"])) for r in rows(table)]


def test_runs_over_two_folders_accumulate_and_a_rerun_replaces_only_its_own(tmp_path: Path) -> None:
    x, y, table = host(tmp_path / "x", 25), host(tmp_path / "y", 25), tmp_path / "table"
    assert run("--results-table", str(table), str(x), timeout=120).returncode == 0
    assert run("--results-table", str(table), str(y), timeout=120).returncode == 0
    both = rows(table)
    assert len(both) == 100
    assert {r["source"] for r in both} == {str(h / f"run-{n}/stdout.ndjson") for h in (x, y) for n in range(25)}
    # 50 logs, 50 session ids, each of the log's full path: same-named logs under two roots are two sessions
    assert {r["session_id"] for r in both} == {session_id(r["source"]) for r in both}
    assert len({r["session_id"] for r in both}) == 50

    again = run("--results-table", str(table), str(x), timeout=120)
    assert again.returncode == 0, again.stderr
    assert rows(table) == both  # nothing doubled, nothing of y's dropped

    # A log that changed has its rows replaced where they were: one run now, and on another day
    # (its old partition, left empty, is removed); the other logs' rows are as they were.
    changed = x / "run-0" / "stdout.ndjson"
    changed.write_bytes(RUN)
    os.utime(changed, (DAY + 86400, DAY + 86400))
    for n in range(1, 25):
        (x / f"run-{n}" / "stdout.ndjson").unlink()
    assert run("--results-table", str(table), str(x), timeout=120).returncode == 0
    after = keys(table)
    assert (str(changed), 0, "2025-12-01") in after and (str(changed), 1, "2025-11-30") not in after
    assert [k for k in after if k[0] != str(changed)] == [k for k in keys_of(both) if k[0] != str(changed)]

    only = tmp_path / "only"
    host(only, 1, day=DAY + 2 * 86400)
    assert run("--results-table", str(table), str(only), timeout=120).returncode == 0
    changed.write_bytes(RUN)  # the same log moved back a day: its 2025-12-01 partition is left empty
    os.utime(changed, (DAY, DAY))
    assert run("--results-table", str(table), str(x), timeout=120).returncode == 0
    from deltalake import DeltaTable

    days = {str(d["date"]) for d in DeltaTable(str(table)).partitions()}
    assert days == {"2025-11-30", "2025-12-02"}


def keys_of(found: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(r["source"], r["run_index"], str(r["date"])) for r in found]


def test_an_output_of_another_log_is_never_replaced(tmp_path: Path) -> None:
    x, y, out = host(tmp_path / "x", 2), host(tmp_path / "y", 2), tmp_path / "out"
    assert run("--out-dir", str(out), str(x), timeout=120).returncode == 0
    made = {p: p.read_bytes() for p in out.rglob("*.jsonl")}
    assert len(made) == 2
    for extra in ([], ["--force"]):
        refused = run("--out-dir", str(out), *extra, str(y), timeout=120)
        assert (refused.returncode, refused.stderr.decode()) == (73, (
            f"translator: --out-dir: {out}/run-0/stdout.enriched.jsonl is the output of {x}/run-0/stdout.ndjson, "
            f"not of {y}/run-0/stdout.ndjson: not overwritten (and 1 more); give these logs another --out-dir\n"))
        assert {p: p.read_bytes() for p in out.rglob("*.jsonl")} == made
    again = run("--out-dir", str(out), str(x), timeout=120)
    assert again.returncode == 0 and b"0 translated, 2 skipped" in again.stderr
    assert run("--out-dir", str(tmp_path / "other"), str(y), timeout=120).returncode == 0
