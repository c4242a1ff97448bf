"""An output directory walked only when a run may have left a temporary there (batch_listing.py),
through the installed command: an unchanged rerun walks no folder of it (a dead writer's
temporary planted there stays), an output removed is still made again (looked up on disk), and
the mark a killed run leaves makes the next run walk and sweep."""

from __future__ import annotations

from pathlib import Path

from support_fixtures import fleet
from support_processes import run

DEAD = 4_194_000  # a pid no process has (PID_MAX is 4,194,304)


def said(*args: str) -> str:
    proc = run(*args, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.decode()


def test_an_unchanged_rerun_walks_nothing_and_a_killed_runs_mark_makes_the_next_walk(tmp_path: Path) -> None:
    logs, out = fleet(tmp_path / "logs", 5), tmp_path / "out"
    command = ["--out-dir", str(out), str(logs)]
    assert "5 translated" in said(*command)
    records = out / ".translator.done"
    assert (records / "swept").exists() and not list(records.glob("running-*"))  # (the first run's, as it ended)
    planted = out / "h0" / "s0" / f".stdout.enriched.jsonl.{DEAD}.tmp"  # a dead writer's temporary
    planted.write_bytes(b"half")
    assert "0 translated, 5 skipped" in said(*command)
    assert planted.exists()  # no walk: nothing looked at but the records and the outputs asked for

    (out / "h1" / "s1" / "stdout.enriched.jsonl").unlink()
    assert "1 translated, 4 skipped" in said(*command)  # (looked up on disk, not in a listing)
    assert (out / "h1" / "s1" / "stdout.enriched.jsonl").exists()

    (records / f"running-{DEAD}").write_bytes(b"")  # what a run killed while it wrote leaves
    assert "0 translated, 5 skipped" in said(*command)
    assert not planted.exists() and not list(records.glob("running-*"))  # walked: swept, its mark gone
