"""The fleet at scale: many small sessions replayed into --out-dir and --results-table, then the
up-to-date rerun and `translator report` over the table; seconds, rates and peak RSS.

    python bench/fleet_scale.py [--sessions 100000] [--runs 0] [--workers 2] [--logs DIR]

The sessions are bench/fleet.py's (a fleet's layout, two in three the bundled fixtures, the rest
bench/gen.py's runs of 5-80 KB: mean ~18.5 KB) or, with `--runs N`, N copies of one fixture's
run each (`--sessions 20000 --runs 8`: the issue's 20,000 sessions of 8 runs). The installed
command runs under /usr/bin/time -v ("Maximum resident set size": the largest of the command
and its workers), after a sync(2), into a new folder; the floor is bench/fleet.py's (every file
read, its lines parsed, its bytes written in the mirrored layout). Target (exit 1 when missed):
every peak <= 256 MiB (replay, up-to-date rerun, 1%-touched rerun, report), and the unchanged
rerun in < 2 minutes writing no table file; the 1%-touched rerun says how many table files it wrote.
`--logs DIR` keeps the fleet in DIR (made there once, its size in DIR/.fleet-bytes, taken as it is
after): a million sessions take ~15 minutes to make on a busy machine, apart from the runs.
`--work DIR` keeps the output directory and the table there, and `--steps` runs some of the
steps (replay,rerun,touched,report), so that a million sessions' steps can be run apart. Each
step says its CPU time (user + sys, the command's and its workers') beside its wall time: on a
shared machine the wall time is the load's as much as the work's.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.fleet import FIXTURES, floor, make_fleet, templates  # noqa: E402
from bench.report import measured  # noqa: E402

TARGET_MIB = 256.0
RERUN_SECONDS = 120.0  # the unchanged rerun, at any size
DAY = 1764460800  # 2025-11-30: sessions spread over the 30 days before it


def copies(root: Path, sessions: int, runs: int) -> int:
    """`sessions` logs of `runs` runs each; their bytes."""
    data = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes() * runs
    for n in range(sessions):
        dest = root / f"host-{n % 50}" / f"session-{n}" / "stdout.ndjson"
        dest.parent.mkdir(parents=True)
        dest.write_bytes(data)
    return len(data) * sessions


def spread(root: Path, days: int = 30) -> None:
    """Each log's modification day drawn over `days` days (a fleet's logs are of many days)."""
    rng = random.Random(days)
    for path in root.rglob("stdout.ndjson"):
        t = DAY - rng.randrange(days * 86400)
        os.utime(path, (t, t))


def made(logs: Path, root: Path, sessions: int, runs: int) -> int:
    """The fleet under `logs` (made unless a kept one is there); its bytes."""
    if (kept := logs / ".fleet-bytes").exists():
        return int(kept.read_text())
    if runs:
        size = copies(logs, sessions, runs)
    else:
        sources, weights = templates(root)
        size = make_fleet(logs, sessions, sources, weights)
    spread(logs)
    kept.write_text(str(size))
    return size


def touch(root: Path, share: float) -> int:
    """`share` of the logs given a new modification time (a second later); how many."""
    logs = sorted(root.rglob("stdout.ndjson"))
    picked = random.Random(7).sample(logs, max(1, int(len(logs) * share)))
    for path in picked:
        st = path.stat()
        os.utime(path, (st.st_atime, st.st_mtime + 1))
    return len(picked)


def files(table: Path) -> dict[str, tuple[int, int]]:
    """Every file of the table as it is (inode, mtime): what a run wrote is what changed."""
    found = {}
    for path in table.rglob("*"):
        if path.is_file():
            st = path.stat()
            found[str(path)] = (st.st_ino, st.st_mtime_ns)
    return found


def cpu(said: str) -> float:
    """The CPU seconds (user + sys) /usr/bin/time -v gave."""
    return sum(float(m.group(1)) for m in re.finditer(r"(?:User|System) time \(seconds\): ([\d.]+)", said))


def summarized(args: list[str]) -> tuple[float, float, str]:
    """Seconds, peak RSS (MiB) and the summary line of the installed command, with its CPU time."""
    seconds, rss, said = measured(args)
    line = re.search(r"translator: (\d+ translated.*)", said)
    return seconds, rss, f"{line.group(1) if line else ''}; CPU {cpu(said):.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=0, help="copies of one run per session (0: bench/fleet.py's mix)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--logs", type=Path, help="the fleet's folder, kept (made there if it holds none)")
    parser.add_argument("--work", type=Path, help="the output directory's and the table's folder, kept")
    parser.add_argument("--steps", default="replay,rerun,touched,report", help="the steps run, in this order")
    args = parser.parse_args()
    steps = args.steps.split(",")
    missed = []
    with tempfile.TemporaryDirectory(prefix="fleet-scale-", dir=args.logs.parent if args.logs else None) as tmp:
        root = Path(tmp)
        if args.work:
            args.work.mkdir(parents=True, exist_ok=True)
        logs = args.logs or root / "logs"
        started = time.perf_counter()
        size = made(logs, root, args.sessions, args.runs)
        print(f"{args.sessions:,} sessions, {size / 1e9:.2f} GB (mean {size / args.sessions / 1e3:.1f} KB), made in "
              f"{time.perf_counter() - started:.0f} s; {os.cpu_count()} cores, {args.workers} workers; "
              f"load average {os.getloadavg()[0]:.1f}")
        base = None
        if not args.no_floor:
            base = floor(logs, root / "floor")
            shutil.rmtree(root / "floor")
            print(f"  floor (read, parse, write each file): {base:.1f} s, {base / args.sessions * 1e3:.3f} ms/file")
        out, table = (args.work or root) / "out", (args.work or root) / "table"
        batch = ["--out-dir", str(out), "--results-table", str(table), "--jobs", str(args.workers), str(logs)]
        for step, label in (("replay", "replay"), ("rerun", "up-to-date rerun"), ("touched", "1%-touched rerun")):
            if step not in steps:
                continue
            if label == "1%-touched rerun":
                touched = touch(logs, 0.01)
            before = files(table)
            seconds, rss, said = summarized(batch)
            ok = rss <= TARGET_MIB
            missed += [] if ok else [label]
            ratio = f", {seconds / base:.2f}x the floor" if base and label == "replay" else ""
            after = files(table)
            written = sum(1 for name, seen in after.items() if before.get(name) != seen)
            extra = ""
            if label == "up-to-date rerun":
                extra = f"; table files written: {written} (target 0)"
                missed += [] if written == 0 and seconds < RERUN_SECONDS else [f"{label} (writes or time)"]
            elif label == "1%-touched rerun":
                extra = f"; {touched:,} logs touched, table files written: {written} of {len(after)}"
            print(f"  {label:<17} {seconds:7.1f} s  {args.sessions / seconds:6.0f} files/s  {size / 1e6 / seconds:6.1f} MB/s"
                  f"{ratio}  peak RSS {rss:5.0f} MiB (target <= {TARGET_MIB:.0f})  {'met' if ok else 'MISSED'}"
                  f"  (load {os.getloadavg()[0]:.1f})\n      {said}{extra}")
        if "report" in steps:
            rows = sum(1 for p in table.iterdir() if p.name.startswith("date="))  # (a Delta table: its day folders)
            seconds, rss, said = measured(["report", str(table)])
            ok = rss <= TARGET_MIB
            missed += [] if ok else ["report"]
            print(f"  report over the table ({rows} partitions): {seconds:.2f} s, CPU {cpu(said):.1f} s, peak RSS "
                  f"{rss:.0f} MiB (target <= {TARGET_MIB:.0f}) {'met' if ok else 'MISSED'}  (load {os.getloadavg()[0]:.1f})")
        print(f"  load average after: {os.getloadavg()[0]:.1f}")
    print("every target met" if not missed else f"missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
