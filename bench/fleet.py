"""Fleet figures (`make bench`): the batch over many small sessions, against its targets.

    python bench/fleet.py [--sizes 1000,4000,16000] [--workers 2]

Sessions in a fleet's layout (`host-H/session-N/stdout.ndjson`, a folder each), drawn with a
fixed seed: two in three are the bundled fixtures (0.3 to 3 KB, agent events and headless
stream-json), the rest bench/gen.py's serde-exact runs of 5, 20 and 80 KB. For 1,000, 4,000
and 16,000 of them: the installed command with `--jobs N`, `--jobs 1` and on a Dask
LocalCluster of N worker processes (what `--cluster local:N` starts; started once beforehand,
its start excluded), each from a clean output. Times are net of the command's own start (the
same command over one file). The floor: in this process, every file read, every line parsed
with orjson and the bytes written to a file in the mirrored layout (its folder made).

Each size is measured ROUNDS times, the floor and the engines back to back in each round; the
ratios to the floor and between the engines are taken within a round, and the median of the
rounds is kept (times: the median). On a shared virtual disk the cost of creating a file swings
2-4x from minute to minute, so runs minutes apart compare the machine, not the work. Every
timed run writes into a new folder and starts after a sync(2), so it pays for writing out its
own files only (the batch syncs its outputs before renaming them; without that, its first sync
would also write out the fleet just made, or the previous run's outputs); the folders of a
round are removed after it, untimed.

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
import statistics
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
ROUNDS = 3
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
    os.sync()
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
    os.sync()
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
    from translator.shell.cluster import connect

    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp, connect(f"local:{n}", n) as client:
        root = Path(tmp)
        sources, weights = templates(root)
        trees = {files: root / f"logs-{files}" for files in sizes}
        size = {files: make_fleet(tree, files, sources, weights) for files, tree in trees.items()}
        one = root / "one"
        one.mkdir()
        shutil.copyfile(sources[0], one / "stdout.ndjson")
        print(f"fleets of {', '.join(f'{f:,}' for f in sizes)} sessions (mean {size[sizes[-1]] / sizes[-1] / 1e3:.1f} KB); "
              f"{os.cpu_count()} cores, {n} workers; load average {os.getloadavg()[0]:.1f}")

        outs = itertools.count()

        def fresh() -> str:
            return str(root / "runs" / str(next(outs)))

        engines: dict[str, Callable[[Path], list[str]]] = {
            "--jobs 1": lambda tree: ["--out-dir", fresh(), "--jobs", "1", str(tree)],  # right after the floor
            f"--jobs {n}": lambda tree: ["--out-dir", fresh(), "--jobs", str(n), str(tree)],  # and right before Dask
            f"Dask, {n} workers": lambda tree: ["--out-dir", fresh(), "--cluster", client.scheduler.address, str(tree)],
        }
        starts = {label: min(timed(argv(one)) for _ in range(3)) for label, argv in engines.items()}  # one file
        rounds: dict[str, dict[int, list[float]]] = {label: {f: [] for f in sizes} for label in [*engines, "floor"]}
        for files in sizes:
            for _ in range(ROUNDS):
                rounds["floor"][files].append(floor(trees[files], Path(fresh())))
                for label, argv in engines.items():
                    rounds[label][files].append(max(1e-3, timed(argv(trees[files])) - starts[label]))
                shutil.rmtree(root / "runs")
        net = {label: {f: statistics.median(times) for f, times in by_size.items()} for label, by_size in rounds.items()}
        for label in engines:
            print(f"{label} (start {starts[label]:.2f} s, subtracted; median of {ROUNDS}):")
            for files in sizes:
                seconds = net[label][files]
                print(f"  {files:6,} files {seconds:7.2f} s  {files / seconds:7.0f} files/s  "
                      f"{size[files] / 1e6 / seconds:6.1f} MB/s  {seconds / files * 1e3:6.3f} ms/file   "
                      f"(rounds: {', '.join(f'{t:.2f}' for t in rounds[label][files])} s)")

        def paired(label: str, base: str, files: int) -> float:
            """The median over the rounds of `label`'s time to `base`'s in the same round."""
            return statistics.median(a / b for a, b in zip(rounds[label][files], rounds[base][files], strict=True))

        last = fresh()
        timed(["--out-dir", last, "--jobs", str(n), str(trees[sizes[-1]])])
        rerun = timed(["--out-dir", last, "--jobs", str(n), str(trees[sizes[-1]])])
        print(f"  up to date, every file skipped ({sizes[-1]:,}, --jobs {n}): {rerun:.2f} s")

        print("growth (net time for 4x the files):")
        for label in engines:
            times = net[label]
            for small, big in itertools.pairwise(sizes):
                ratio = (times[big] / times[small]) / (big / small) * 4
                mark = check(ratio <= TARGETS["growth"], f"{label}: {big:,} files took {ratio:.2f}x the time of 1/4 of them")
                print(f"  {label:<18} {small:6,} -> {big:6,}: {ratio:5.2f}x the time   (target <= {TARGETS['growth']}x)   {mark}")

        print(f"per file against the read+parse+write floor (this process; median of {ROUNDS} rounds' ratios):")
        for files in sizes:
            ratio = paired("--jobs 1", "floor", files)
            mark = check(ratio <= TARGETS["floor"], f"--jobs 1 on {files:,} files: {ratio:.2f}x the floor per file")
            print(f"  {files:6,} files: floor {net['floor'][files] / files * 1e3:6.3f} ms/file, --jobs 1 {ratio:5.2f}x   "
                  f"(target <= {TARGETS['floor']}x)   {mark}   (rounds: "
                  f"{', '.join(f'{a / b:.2f}' for a, b in zip(rounds['--jobs 1'][files], rounds['floor'][files], strict=True))})")

        print(f"Dask against the local pool, per file at {n} workers (wall x workers / files; median of {ROUNDS} rounds' ratios):")
        for files in sizes:
            pool, dask = (net[label][files] * n / files for label in (f"--jobs {n}", f"Dask, {n} workers"))
            ratio = paired(f"Dask, {n} workers", f"--jobs {n}", files)
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
