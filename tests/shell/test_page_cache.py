"""A batch lets go of what it read and wrote once (local_disk._forget), through the installed
command: after a replay into --out-dir, no page of a log or of its output is left in the page
cache (as fincore(1) counts them), so that a fleet's replay does not push the file system's
metadata, which the next rerun reads again, out of memory. The logs are synced first: only a
clean page can be let go of."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support_fixtures import fleet
from support_processes import run

FINCORE = shutil.which("fincore")


def cached(paths: list[Path]) -> dict[str, int]:
    """The pages of each file in the page cache, by fincore(1) (mincore(2))."""
    said = subprocess.run([str(FINCORE), "--raw", "--noheadings", "--bytes", "--output", "PAGES,FILE",
                           *map(str, paths)], capture_output=True, check=True, text=True).stdout
    return {file: int(pages) for pages, file in (line.split(maxsplit=1) for line in said.splitlines())}


@pytest.mark.skipif(FINCORE is None, reason="fincore(1) (util-linux) is not installed")
def test_a_replay_leaves_neither_its_logs_nor_its_outputs_in_the_page_cache(tmp_path: Path) -> None:
    logs, out = fleet(tmp_path / "logs", 6), tmp_path / "out"
    sources = sorted(logs.rglob("stdout.ndjson"))
    os.sync()
    for source in sources:  # read back in: the copies' pages, clean now, are cached
        source.read_bytes()
    assert all(pages > 0 for pages in cached(sources).values())
    proc = run("--out-dir", str(out), str(logs), timeout=120)
    assert proc.returncode == 0 and b"6 translated" in proc.stderr, proc.stderr
    outputs = sorted(out.rglob("stdout.enriched.jsonl"))
    assert len(outputs) == 6 and all(path.stat().st_size > 0 for path in outputs)
    assert cached(sources + outputs) == dict.fromkeys(map(str, sources + outputs), 0)
