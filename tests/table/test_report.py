"""`translator report` says what the table's rows say: its totals, per model and per day, and
the failures by reason, counted here from the rows themselves (pyarrow, in Python) and compared
with what the command prints in each format; the filters; the HTML page leads with the totals
and shows the failures' reasons."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from support_processes import TRANSLATOR

from bench.report import synthetic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "table"
    synthetic(path, 5000, 90)
    return path


def rows(table: Path) -> list[dict[str, Any]]:
    import pyarrow.dataset as ds

    return ds.dataset(str(table), partitioning=ds.partitioning(flavor="hive")).to_table().to_pylist()  # type: ignore[no-any-return]


def report(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, "report", *args], capture_output=True, timeout=120)


def reason(error: str | None) -> str:
    if error is None:
        return "(no error text)"
    for head, kind in (("server error (HTTP ", "server error"), ("rate limit exceeded", "rate limit exceeded"),
                       ("context too long: ", "context too long"), ("adapter error: ", "adapter error")):
        if error.startswith(head):
            return kind
    return "other"


def test_json_is_the_rows_totals_per_model_per_day_and_failures(table: Path) -> None:
    runs = rows(table)
    proc = report(str(table), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    failed = [r for r in runs if r["is_error"]]
    assert got["runs"] == len(runs) == 5000 and got["failed"] == len(failed) > 100
    assert got["sessions"] == len({r["session_id"] for r in runs}) and got["logs"] == len({r["source"] for r in runs})
    assert got["failure_rate"] == pytest.approx(len(failed) / len(runs))
    assert got["total_cost_usd"] == pytest.approx(sum(r["total_cost_usd"] for r in runs), abs=1e-5)
    assert got["input_tokens"] == sum(r["input_tokens"] for r in runs)
    assert got["output_tokens"] == sum(r["output_tokens"] for r in runs)
    assert (got["first_day"], got["last_day"]) == ("2025-09-01", "2025-11-29")
    models: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        models[r["model"]].append(r)
    assert {m["model"]: (m["runs"], m["failed"]) for m in got["by_model"]} == {
        name: (len(rs), sum(r["is_error"] for r in rs)) for name, rs in models.items()}
    costs = [m["total_cost_usd"] for m in got["by_model"]]
    assert costs == sorted(costs, reverse=True)  # the costliest first
    assert [(d["day"], d["runs"]) for d in got["by_day"]] == sorted(Counter(str(r["date"]) for r in runs).items())
    assert len(got["by_day"]) == 90
    assert {(f["reason"], f["runs"]) for f in got["failures"]["by_reason"]} == set(Counter(reason(r["error"]) for r in failed).items())
    assert got["failures"]["by_subtype"] == [{"subtype": "error", "runs": len(failed)}]
    top = Counter(r["error"] for r in failed).most_common(3)
    assert [(e["error"], e["runs"]) for e in got["failures"]["top_errors"][:3]] == top


def test_filters_keep_the_days_and_the_model_asked_for(table: Path) -> None:
    runs = rows(table)
    proc = report(str(table), "--format", "json", "--since", "2025-10-01", "--until", "2025-10-31", "--model", "gpt-5")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    kept = [r for r in runs if "2025-10-01" <= str(r["date"]) <= "2025-10-31" and r["model"] == "gpt-5"]
    assert (got["runs"], got["failed"]) == (len(kept), sum(r["is_error"] for r in kept)) and kept
    assert [m["model"] for m in got["by_model"]] == ["gpt-5"] and len(got["by_day"]) == 31
    assert got["filters"] == {"since": "2025-10-01", "until": "2025-10-31", "model": "gpt-5"}
    none = report(str(table), "--model", "nobody")
    assert (none.returncode, none.stdout, none.stderr.decode()) == (66, b"", f"translator: {table}: no runs (filtered)\n")
    bad = report(str(table), "--since", "yesterday")
    assert bad.returncode == 64 and bad.stderr.decode().endswith("argument --since: not a day (YYYY-MM-DD): 'yesterday'\n")


def test_text_leads_with_the_totals_and_csv_is_the_table_per_day_and_model(table: Path) -> None:
    runs = rows(table)
    text = report(str(table)).stdout.decode()
    failed = sum(r["is_error"] for r in runs)
    assert text.startswith(f"5,000 runs in {len({r['source'] for r in runs}):,} logs ")
    assert f", {failed:,} failed ({100 * failed / 5000:.1f}%), " in text.splitlines()[0]
    for title in ("By model", "By day", "Failures by reason", "Failures by subtype", "Top error messages"):
        assert f"\n\n{title}\n" in text
    got = list(csv.DictReader(io.StringIO(report(str(table), "--format", "csv").stdout.decode())))
    cells = Counter((str(r["date"]), r["model"]) for r in runs)
    assert {(g["day"], g["model"]): int(g["runs"]) for g in got} == cells
    assert list(got[0]) == ["day", "model", "runs", "failed", "total_cost_usd", "input_tokens", "output_tokens"]


def test_the_page_leads_with_the_totals_and_shows_the_failures_reasons(table: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    proc = report(str(table), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    body = page.read_text()
    head = body.split("<svg")[0]
    assert "<b>5,000</b>runs" in head and "<div class=card bad><b>" in head and "cost" in head  # before any plot
    assert body.count("<svg") == 3 and "<script" not in body and "http" not in head
    for shown in ("Failed runs by reason", "server error", "rate limit exceeded", "context too long", "Top error messages"):
        assert shown in body
    assert "<td class=bad>" in body  # failures in their colour


def test_a_table_that_is_no_parquet_or_has_no_runs_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad" / "date=2025-01-01").mkdir(parents=True)
    (tmp_path / "bad" / "date=2025-01-01" / "part-0.parquet").write_bytes(b"garbage\n")
    bad = report(str(tmp_path / "bad"))
    assert (bad.returncode, bad.stdout) == (66, b"")
    assert bad.stderr.decode().startswith(f"translator: {tmp_path / 'bad'}: ") and bad.stderr.count(b"\n") == 1
    (tmp_path / "empty").mkdir()
    empty = report(str(tmp_path / "empty"))
    assert (empty.returncode, empty.stderr.decode()) == (66, f"translator: {tmp_path / 'empty'}: no runs\n")
