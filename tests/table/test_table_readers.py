"""DuckDB, Polars and pyarrow read the results table as docs/fleet.md says, its examples run as
written over a table the installed command wrote and then rewrote (a commit that replaced
rows leaves their old files, which a glob of the Parquet files counts twice: the documented
reads do not)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support_fixtures import FIXTURES, ROOT
from support_processes import run

pytestmark = pytest.mark.slow
RUN = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes()


def blocks(kind: str) -> list[str]:
    text = (ROOT / "docs" / "fleet.md").read_text().split("## Results table", 1)[1].split("## Report", 1)[0]
    return [b.split("```", 1)[0] for b in text.split(f"```{kind}\n")[1:]]


def test_the_documented_reads_count_each_row_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    logs = tmp_path / "logs"
    for n in range(4):
        (logs / f"s{n}").mkdir(parents=True)
        (logs / f"s{n}" / "stdout.ndjson").write_bytes(RUN * 2)
    assert run("--results-table", str(tmp_path / "results"), str(logs), timeout=120).returncode == 0
    (logs / "s0" / "stdout.ndjson").write_bytes(RUN * 3)  # one log's rows replaced, one added
    assert run("--results-table", str(tmp_path / "results"), str(logs), timeout=120).returncode == 0
    globbed = duckdb.sql(f"select count(*) from read_parquet('{tmp_path}/results/**/*.parquet')").fetchall()[0][0]
    assert globbed > 9  # the replaced file is still there: a glob counts its rows twice

    monkeypatch.chdir(tmp_path)
    python = blocks("py")
    assert len(python) == 2
    scope: dict[str, object] = {}
    for block in python:
        exec(compile(block, "docs/fleet.md", "exec"), scope)
    runs = scope["runs"]  # (DuckDB finds `runs` among the caller's variables, as in the docs' own block)
    assert duckdb.sql("select count(*) from runs").fetchall() == [(9,)]
    per_model = scope["per_model"]
    assert per_model.height == 1 and per_model["total_cost_usd"][0] > 0  # type: ignore[attr-defined]
    assert scope["table"].num_rows == 9  # type: ignore[attr-defined]
    sql = blocks("sql")
    assert len(sql) == 3
    for query in sql:
        assert duckdb.sql(query).fetchall()
    assert runs is not None and os.path.isdir(tmp_path / "results" / "_delta_log")
