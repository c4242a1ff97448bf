"""`translator report` for a first user: its per-day charts tick days at any span (a one-day
table drew hours), and a path that is a file, not a table, is said to be one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support_processes import TRANSLATOR

from bench.report import synthetic

pytestmark = pytest.mark.slow


def report(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, "report", *args], capture_output=True, timeout=120)


def x_ticks(svg: str) -> list[str]:
    """The texts of a figure's x axis, its ticks' labels and offset (matplotlib writes each text
    in a comment before its glyphs)."""
    axis = svg.split('<g id="matplotlib.axis_1">')[1].split('<g id="matplotlib.axis_2">')[0]
    return re.findall(r"<!-- (.*?) -->", axis)


@pytest.mark.parametrize("days", [1, 3, 40, 400])
def test_the_per_day_charts_tick_days_at_any_span(tmp_path: Path, days: int) -> None:
    synthetic(tmp_path / "table", 40 * days if days < 100 else 2000, days)
    proc = report(str(tmp_path / "table"), "--html", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    cost, runs = tmp_path.joinpath("r.html").read_text().split("<svg")[1:3]
    for figure in (cost, runs):
        labels = x_ticks(figure)
        assert labels and not any(re.fullmatch(r"\d\d:\d\d", label) for label in labels), labels
        assert len(labels) <= 12, labels


def test_a_file_that_is_no_table_is_said_to_be_one(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text("{}\n")
    proc = report(str(tmp_path / "runs.jsonl"))
    assert (proc.returncode, proc.stdout) == (66, b"")
    assert proc.stderr.decode() == (f"translator: {tmp_path / 'runs.jsonl'}: a file, not a results table "
                                    "(the directory --results-table writes)\n")
    missing = report(str(tmp_path / "nothing"))
    assert missing.stderr.decode() == f"translator: {tmp_path / 'nothing'}: No such file or directory\n"
