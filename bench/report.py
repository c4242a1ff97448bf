"""`translator report` over a large results table: seconds and peak RSS, against its targets.

    python bench/report.py [--rows 1000000] [--days 90] [--keep DIR]

The table is drawn with a fixed seed in the results table's own schema (translator.table.parquet), as a Delta table:
a fleet of sessions of ~6.5 runs each over `--days` days, eight models with their own costs,
~4% failed runs (three provider errors behind most of them, as a real fleet's are), one
partition a day. Then the installed `translator report` over it, in each format and with an
HTML page, under /usr/bin/time -v (its "Maximum resident set size": the whole process).
Targets (exit 1 when one is missed): <= 60 s and <= 1 GiB peak for each.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
TRANSLATOR = str(Path(sys.executable).parent / "translator")
TARGETS = {"seconds": 60.0, "rss_mib": 1024.0}
MODELS = ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5", "gpt-5", "gpt-5-mini", "gemini-2.5-pro",
          "qwen3-coder", "deepseek-v3"]
ERRORS = ['server error (HTTP 529): {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
          "rate limit exceeded", "context too long: 212000 tokens > 200000"]
DAY_MS = 86_400_000
START_MS = 1_756_684_800_000  # 2025-09-01


def synthetic(path: Path, rows: int, days: int, seed: int = 31, legacy: bool = False) -> None:
    """`rows` runs as the results table holds them at `path`: a Delta table partitioned by day, one
    commit (`legacy`: the writer before's Parquet dataset, `date=.../part-0.parquet`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    from translator.table.parquet import schema

    rng = np.random.default_rng(seed)
    day = np.sort(rng.integers(0, days, rows))
    session = rng.integers(0, max(1, rows // 6.5), rows)
    model = rng.choice(len(MODELS), rows, p=[0.3, 0.1, 0.2, 0.15, 0.1, 0.07, 0.05, 0.03])
    failed = rng.random(rows) < 0.04
    reason = rng.choice(len(ERRORS) + 1, rows, p=[0.55, 0.25, 0.12, 0.08])
    inputs = rng.integers(500, 60_000, rows)
    outputs = rng.integers(50, 4_000, rows)
    price = np.array([3, 15, 1, 1.25, 0.25, 1.25, 0.4, 0.27])[model]
    first = START_MS + day * DAY_MS + rng.integers(0, DAY_MS - 3_600_000, rows)
    duration = rng.lognormal(10, 1, rows).astype(np.int64)
    names = pa.array([f"s3://fleet/logs/host-{s % 50}/session-{s}/stdout.ndjson" for s in range(session.max() + 1)])
    ids = pa.array([f"{s:08x}-0000-5000-8000-{s:012x}" for s in range(session.max() + 1)])
    errors = [None if not f else (ERRORS[r] if r < len(ERRORS) else f"adapter error: tool {n % 97} crashed")
              for f, r, n in zip(failed, reason, range(rows), strict=True)]
    subtype = np.where(failed, "error", "success")
    table = pa.table({
        "source": names.take(pa.array(session)), "run_index": pa.array(np.arange(rows) % 7, pa.int32()),
        "session_id": ids.take(pa.array(session)), "subtype": pa.array(subtype), "is_error": pa.array(failed),
        "num_turns": pa.array(rng.integers(1, 30, rows)), "input_tokens": pa.array(inputs),
        "output_tokens": pa.array(outputs), "cache_read_input_tokens": pa.array(inputs // 2),
        "cache_creation_input_tokens": pa.array(inputs // 10),
        "total_cost_usd": pa.array((inputs * price + outputs * price * 5) / 1e6),
        "duration_ms": pa.array(duration), "duration_api_ms": pa.array(duration * 8 // 10),
        "duration_source": pa.array(["recorded"] * rows), "model": pa.array([MODELS[m] for m in model]),
        "models": pa.array([[MODELS[m]] for m in model], pa.list_(pa.string())), "error": pa.array(errors, pa.string()),
        "tool_calls": pa.array(rng.integers(0, 40, rows)),
        "first_ts": pa.array(first, pa.timestamp("ms", tz="UTC")),
        "last_ts": pa.array(first + duration, pa.timestamp("ms", tz="UTC")),
        "log_mtime": pa.array(first + duration, pa.timestamp("ms", tz="UTC")),
    }, schema=schema().remove(len(schema()) - 1))
    dates = [time.strftime("%Y-%m-%d", time.gmtime((START_MS + d * DAY_MS) / 1000)) for d in range(days)]
    if not legacy:
        write_deltalake(str(path), table.append_column("date", pa.array(dates).take(pa.array(day))), partition_by=["date"])
        return
    bounds = np.searchsorted(day, np.arange(days + 1))
    for d in range(days):
        folder = path / f"date={dates[d]}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(bounds[d], bounds[d + 1] - bounds[d]), folder / "part-0.parquet", row_group_size=131_072)


def measured(args: list[str]) -> tuple[float, float, str]:
    """Seconds, peak RSS (MiB) and stderr of the installed command (after a sync(2))."""
    os.sync()
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", TRANSLATOR, *args], capture_output=True, timeout=3600)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{proc.stderr.decode()[-3000:]}")
    rss = re.search(rb"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    assert rss is not None
    return seconds, int(rss.group(1)) / 1024, proc.stderr.decode()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--table", help="report over this table instead of drawing one")
    args = parser.parse_args()
    missed = []
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        table = Path(args.table) if args.table else Path(tmp) / "table"
        if not args.table:
            started = time.perf_counter()
            synthetic(table, args.rows, args.days)
            print(f"drew {args.rows:,} runs over {args.days} days in {time.perf_counter() - started:.1f} s")
        size = sum(p.stat().st_size for p in table.rglob("*.parquet"))
        print(f"table {table}: {size / 1e6:.1f} MB; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        for label, extra in (("text", []), ("json", ["--format", "json"]), ("csv", ["--format", "csv"]),
                             ("text + --html", ["--html", str(Path(tmp) / "report.html")])):
            seconds, rss, _ = measured(["report", str(table), *extra])
            ok = seconds <= TARGETS["seconds"] and rss <= TARGETS["rss_mib"]
            if not ok:
                missed.append(label)
            print(f"  report {label:<14} {seconds:6.2f} s  peak RSS {rss:6.0f} MiB   "
                  f"(targets <= {TARGETS['seconds']:.0f} s, <= {TARGETS['rss_mib']:.0f} MiB)   {'met' if ok else 'MISSED'}")
        if args.table is None:
            shutil.rmtree(table, ignore_errors=True)
    print("every target met" if not missed else f"missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
