"""Where users look, the table's reading is said (issue 41): the README's batch section sends its
readers to docs/fleet.md's "Reading it", which says why a glob of the Parquet files counts a
replaced row twice, gives the vacuum that runs as written, and, for a table of the writer
before, that its globbing queries must read the table instead; the CHANGELOG says it too."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support_fixtures import FIXTURES, ROOT
from support_processes import run

pytestmark = pytest.mark.slow


def section(page: str, heading: str) -> str:
    text = (ROOT / page).read_text()
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return " ".join(text[start:end if end > 0 else None].split())


def test_the_readme_sends_readers_of_the_table_to_its_reading_and_the_vacuum_runs(tmp_path: Path) -> None:
    readme = section("README.md", "### Batch and fleet")
    assert "not by globbing its files" in readme and "docs/fleet.md#results-table" in readme
    fleet = section("docs/fleet.md", "## Results table")
    reading = fleet.split("*Reading it.*", 1)[1].split("DuckDB, over", 1)[0]
    assert "never by globbing its Parquet files" in reading and "would count a replaced row twice" in reading
    upgrade = fleet.split("*Upgrading a table of the writer before*", 1)[1].split("*Memory.*", 1)[0]
    assert "converted to a Delta table" in upgrade and "must read the table instead" in upgrade
    assert "a glob of its Parquet files counts replaced rows twice" in " ".join((ROOT / "CHANGELOG.md").read_text().split())

    (vacuum,) = re.findall(r'`(python -c "from deltalake import DeltaTable; [^`]*vacuum[^`]*)`', reading)
    logs = tmp_path / "logs"
    (logs / "s0").mkdir(parents=True)
    (logs / "s0" / "stdout.ndjson").write_bytes((FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes())
    assert run("--results-table", str(tmp_path / "results"), str(logs), timeout=120).returncode == 0
    code = vacuum.removeprefix('python -c "').removesuffix('"')
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr  # as written: within the retention, nothing is removed
    assert (tmp_path / "results" / "_delta_log").is_dir() and list((tmp_path / "results").rglob("*.parquet"))
