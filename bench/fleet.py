"""Fleet figures (`make bench`): the batch over many small sessions, against its targets.

    python bench/fleet.py [--sizes 1000,4000,16000] [--workers 2]

Sessions in a fleet's layout (`host-H/session-N/stdout.ndjson`, a folder each), drawn with a
fixed seed: two in three are the bundled fixtures (0.3 to 3 KB, agent events and headless
stream-json), the rest bench/gen.py's serde-exact runs of 5, 20 and 80 KB. For 1,000, 4,000
and 16,000 of them: the installed command with `--jobs N`, `--jobs 1` and on a Dask
LocalCluster of N worker processes (what `--cluster local:N` starts; started once beforehand,
its start excluded), each from a clean output. Times are net of the command's own start (the
same command over one file). Then the floor: in this process, every file read, every line
parsed with orjson and the bytes written to a file in the mirrored layout (its folder made).

Targets (exit 1 when one is missed):
  - growth: 4x the files <= 4.4x the time, for every engine;
  - `--jobs 1` per file <= 3x the read+parse+write floor's per file, at every size;
  - Dask's per-file cost (wall x workers / files) <= 1.5x the local pool's at N workers.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
sys.path.insert(0, str(HERE.parent))

from bench.gen import generate  # noqa: E402

TRANSLATOR = str(Path(sys.executable).parent / "translator")
TARGETS = {"growth": 4.4, "floor": 3.0, "dask": 1.5}
MISSED: list[str] = []


def check(ok: bool, what: str) -> str:
    if not ok:
        MISSED.append(what)
    return "met" if ok else "MISSED"


def templates(root: Path) -> tuple[list[Path], list[float]]:
    """The files sessions are copied from, and the weight of each."""
    fixtures = sorted(p for p in [*FIXTURES.glob("*.events.jsonl"), *(FIXTURES / "headless").glob("*.jsonl")])
    made = []
    for kb in (5, 20, 80):
        made.append(root / f"gen-{kb}.ndjson")
        generate(str(made[-1]), kb / 1000)
    weights = [2 / 3 / len(fixtures)] * len(fixtures) + [0.2, 0.1, 1 / 30]
    return [*fixtures, *made], weights


def make_fleet(root: Path, files: int, sources: list[Path], weights: list[float]) -> int:
    """`files` sessions under `root`; their bytes."""
    rng = random.Random(files)
    total = 0
    for n in range(files):
        dest = root / f"host-{n % 50}" / f"session-{n}" / "stdout.ndjson"
        dest.parent.mkdir(parents=True)
        source = rng.choices(sources, weights)[0]
        shutil.copyfile(source, dest)
        total += source.stat().st_size
    return total


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([TRANSLATOR, *args], capture_output=True, timeout=1800)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{proc.stderr.decode()}")
    return elapsed


def floor(src: Path, out: Path) -> float:
    """Seconds to read every file under `src`, parse its lines and write its bytes to `out`."""
    import orjson

    loads = orjson.loads
    paths = sorted(src.rglob("*.ndjson"))
    started = time.perf_counter()
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        for line in data.splitlines():
            loads(line)
        dest = out / path.relative_to(src)
        try:
            target = open(dest, "wb")  # noqa: SIM115
        except FileNotFoundError:
            dest.parent.mkdir(parents=True, exist_ok=True)
            target = open(dest, "wb")  # noqa: SIM115
        with target:
            target.write(data)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    n = args.workers
    import logging

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp, \
            LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            Client(lc) as client:
        root = Path(tmp)
        sources, weights = templates(root)
        trees = {files: root / f"logs-{files}" for files in sizes}
        size = {files: make_fleet(tree, files, sources, weights) for files, tree in trees.items()}
        one = root / "one"
        one.mkdir()
        shutil.copyfile(sources[0], one / "stdout.ndjson")
        print(f"fleets of {', '.join(f'{f:,}' for f in sizes)} sessions (mean {size[sizes[-1]] / sizes[-1] / 1e3:.1f} KB); "
              f"{os.cpu_count()} cores, {n} workers; load average {os.getloadavg()[0]:.1f}")

        def fresh() -> str:
            shutil.rmtree(root / "out", ignore_errors=True)
            return str(root / "out")

        engines: dict[str, Callable[[Path], list[str]]] = {
            f"--jobs {n}": lambda tree: ["--out-dir", fresh(), "--jobs", str(n), str(tree)],
            "--jobs 1": lambda tree: ["--out-dir", fresh(), "--jobs", "1", str(tree)],
            f"Dask, {n} workers": lambda tree: ["--out-dir", fresh(), "--cluster", client.scheduler.address, str(tree)],
        }
        net: dict[str, dict[int, float]] = {}
        for label, argv in engines.items():
            start = min(timed(argv(one)) for _ in range(3))  # the command's own start, one file
            net[label] = {}
            print(f"{label} (start {start:.2f} s, subtracted):")
            for files in sizes:
                seconds = max(1e-3, timed(argv(trees[files])) - start)
                net[label][files] = seconds
                print(f"  {files:6,} files {seconds:7.2f} s  {files / seconds:7.0f} files/s  "
                      f"{size[files] / 1e6 / seconds:6.1f} MB/s  {seconds / files * 1e3:6.3f} ms/file")
        rerun = timed(["--out-dir", str(root / "out"), "--jobs", str(n), str(trees[sizes[-1]])])
        print(f"  up to date, every file skipped ({sizes[-1]:,}, --jobs {n}): {rerun:.2f} s")

        print("growth (net time for 4x the files):")
        for label, times in net.items():
            for small, big in itertools.pairwise(sizes):
                ratio = (times[big] / times[small]) / (big / small) * 4
                mark = check(ratio <= TARGETS["growth"], f"{label}: {big:,} files took {ratio:.2f}x the time of 1/4 of them")
                print(f"  {label:<18} {small:6,} -> {big:6,}: {ratio:5.2f}x the time   (target <= {TARGETS['growth']}x)   {mark}")

        print("per file against the read+parse+write floor (this process):")
        for files in sizes:
            shutil.rmtree(root / "floor", ignore_errors=True)
            base = floor(trees[files], root / "floor") / files
            ratio = net["--jobs 1"][files] / files / base
            mark = check(ratio <= TARGETS["floor"], f"--jobs 1 on {files:,} files: {ratio:.2f}x the floor per file")
            print(f"  {files:6,} files: floor {base * 1e3:6.3f} ms/file, --jobs 1 {ratio:5.2f}x   "
                  f"(target <= {TARGETS['floor']}x)   {mark}")

        print(f"Dask against the local pool, per file at {n} workers (wall x workers / files):")
        for files in sizes:
            pool, dask = (net[label][files] * n / files for label in (f"--jobs {n}", f"Dask, {n} workers"))
            ratio = dask / pool
            mark = check(ratio <= TARGETS["dask"], f"Dask on {files:,} files: {ratio:.2f}x the local pool per file")
            print(f"  {files:6,} files: pool {pool * 1e3:6.3f} ms, Dask {dask * 1e3:6.3f} ms: {ratio:5.2f}x   "
                  f"(target <= {TARGETS['dask']}x)   {mark}")
    if MISSED:
        print(f"\n{len(MISSED)} target(s) missed:")
        for what in MISSED:
            print(f"  - {what}")
        return 1
    print("\nevery target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
