"""Fleet figures: files/s and MB/s of the batch on 2,000 generated session logs.

    python bench/fleet.py [--files 2000] [--big-mb 5] [--workers 2]

Logs (bench/gen.py's serde-exact runs) in a fleet's layout, `host-H/session-N/stdout.ndjson`,
sizes log-normal around 40 KB (10 to 320 KB) plus four large ones (5 MB). Each
configuration is one run of the installed command, from a clean output (interpreter start
included), on:
  - local disk, the local process pool (`--jobs N`);
  - local disk, a Dask LocalCluster of N processes (`--cluster local:N`, its start included),
    and the same on a cluster started beforehand (`--cluster tcp://…`, the start excluded);
  - S3 (moto's server on 127.0.0.1, in this process) in and out, pool and cluster.
Then the engine's overhead per file: 2,000 one-run logs, each translated in a loop in one
process (the work alone) against the pool and the cluster (work + engine).
Not part of `make bench`: it starts a cluster and a server on a machine others share.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.gen import generate  # noqa: E402

TRANSLATOR = str(Path(sys.executable).parent / "translator")


def make_fleet(root: Path, files: int, big_mb: float, seed: int = 12) -> tuple[int, int]:
    """`files` logs: sizes from 10 KB to 320 KB, log-normal around 40 KB, and four of
    `big_mb`; (files, bytes)."""
    rng = random.Random(seed)
    templates = root / "templates"
    templates.mkdir(parents=True)
    classes = ["0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "big"]  # MB, generated once each and copied
    for mb in classes:
        generate(str(templates / f"{mb}.ndjson"), big_mb if mb == "big" else float(mb))
    weights = [math.exp(-((math.log(float(mb)) - math.log(0.04)) ** 2) / 2) for mb in classes[:-1]]
    total = 0
    for n in range(files):
        name = "big" if n % (files // 4) == 0 else rng.choices(classes[:-1], weights)[0]
        dest = root / "logs" / f"host-{n % 50}" / f"session-{n}" / "stdout.ndjson"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(templates / f"{name}.ndjson", dest)
        total += dest.stat().st_size
    shutil.rmtree(templates)
    return files, total


def timed(args: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run([TRANSLATOR, *args], capture_output=True, env=env, timeout=1800)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{proc.stderr.decode()}")
    return elapsed


def line(label: str, files: int, size: int, seconds: float) -> None:
    print(f"  {label:<44} {seconds:7.2f} s  {files / seconds:8.0f} files/s  {size / 1e6 / seconds:7.1f} MB/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--big-mb", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from distributed import Client, LocalCluster
    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    n = args.workers
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        files, size = make_fleet(root, args.files, args.big_mb)
        sizes = sorted(p.stat().st_size for p in (root / "logs").rglob("*.ndjson"))
        print(f"{files} logs, {size / 1e6:.1f} MB (median {sizes[len(sizes) // 2] / 1e3:.0f} KB, "
              f"largest {sizes[-1] / 1e6:.1f} MB); {os.cpu_count()} cores shared with other work, {n} workers")
        glob = str(root / "logs" / "**" / "stdout.ndjson")

        def fresh(name: str) -> str:
            shutil.rmtree(root / name, ignore_errors=True)
            return str(root / name)

        print("local disk:")
        line(f"process pool (--jobs {n})", files, size, timed(["--out-dir", fresh("out"), "--jobs", str(n), glob]))
        line(f"LocalCluster (--cluster local:{n}, start incl.)", files, size,
             timed(["--out-dir", fresh("out"), "--cluster", f"local:{n}", glob]))
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        conf = {"endpoint_url": f"http://{host}:{port}", "key": "bench", "secret": "bench"}
        os.environ.update(FSSPEC_S3=json.dumps(conf), AWS_DEFAULT_REGION="us-east-1")
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
                Client(lc) as client:
            address = client.scheduler.address
            line(f"LocalCluster (running, {n} workers)", files, size, timed(["--out-dir", fresh("out"), "--cluster", address, glob]))
            line(f"process pool + --results-table (--jobs {n})", files, size,
                 timed(["--out-dir", fresh("out"), "--results-table", fresh("table"), "--jobs", str(n), glob]))
            line("up to date: every file skipped (pool)", files, size, timed(["--out-dir", str(root / "out"), "--jobs", str(n), glob]))

            fs = S3FileSystem(skip_instance_cache=True, **conf)
            fs.mkdir("fleet")
            started = time.perf_counter()
            fs.put(str(root / "logs"), "fleet/logs", recursive=True)
            print(f"S3 (moto on 127.0.0.1, a Python server in this process): upload {time.perf_counter() - started:.1f} s")
            s3glob = "s3://fleet/logs/**/stdout.ndjson"
            line(f"process pool (--jobs {n})", files, size, timed(["--out-dir", "s3://fleet/out-pool", "--jobs", str(n), s3glob]))
            line(f"LocalCluster (running, {n} workers)", files, size, timed(["--out-dir", "s3://fleet/out-dask", "--cluster", address, s3glob]))
            line("up to date: every file skipped (cluster)", files, size, timed(["--out-dir", "s3://fleet/out-dask", "--cluster", address, s3glob]))

            tiny = root / "tiny"
            generate(str(root / "one.ndjson"), 0.005)  # one run: the smallest log gen.py makes
            print(f"engine overhead per file ({args.files} one-run logs of {(root / 'one.ndjson').stat().st_size / 1e3:.0f} KB):")
            for i in range(args.files):
                (tiny / f"s{i}").mkdir(parents=True)
                shutil.copyfile(root / "one.ndjson", tiny / f"s{i}" / "stdout.ndjson")
            alone = in_process(tiny)
            pool = timed(["--out-dir", fresh("tiny-out"), "--jobs", str(n), str(tiny)])
            dask = timed(["--out-dir", fresh("tiny-out"), "--cluster", address, str(tiny)])
            start = timed(["--version"])
            print(f"  the work alone, in one process:   {alone / args.files * 1e3:6.3f} ms/file")
            for label, wall in (("process pool", pool), ("LocalCluster", dask)):
                per_file = (wall - start) * n / args.files
                print(f"  {label:<14} wall x workers / files: {per_file * 1e3:6.3f} ms/file, "
                      f"overhead {max(0.0, per_file - alone / args.files) * 1e3:6.3f} ms/file")
        server.stop()


def in_process(folder: Path) -> float:
    """Seconds to translate every log under `folder` in this process, one after another."""
    from translator.core.rates import RateCard
    from translator.core.translator import Options
    from translator.shell.batch import LocalStore
    from translator.shell.replay import Job, translate_file

    card = RateCard.bundled()
    template = Job(format="enriched", partial=False, results_only=False, rates=card, rates_digest=card.fingerprint(),
                   options=Options(), clock="auto", force=True)
    store = LocalStore()
    out = folder.parent / "tiny-alone"
    paths = sorted(folder.rglob("*.ndjson"))
    started = time.perf_counter()
    for i, path in enumerate(paths):
        st = path.stat()
        job = Job(**{**template.__dict__, "source": str(path), "relative": f"s{i}/stdout.ndjson",
                     "target": str(out / f"s{i}.enriched.jsonl"), "size": st.st_size, "mtime": st.st_mtime})
        translate_file(job, store)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
