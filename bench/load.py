"""Load test of the translation service (`make load`): many concurrent connections replaying
the reference streams, every output checked against the core's own translation.

    python bench/load.py [--connections 5000] [--concurrency 100]

Prints connections/s, frames/s and the service's peak RSS. Traffic stays on a unix socket in a
temporary directory; the run is bounded by --connections.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.core.rates import RateCard  # noqa: E402
from translator.core.translator import Options, Translator  # noqa: E402
from translator.encoders.enriched import EnrichedEncoder  # noqa: E402

TRANSLATOR = str(Path(sys.executable).parent / "translator")
TIMING = (b"duration_ms", b"duration_api_ms", b"duration_source")


def comparable(output: bytes) -> list[dict]:
    frames = [orjson.loads(line) for line in output.splitlines()]
    return [{k: v for k, v in f.items() if k.encode() not in TIMING} for f in frames]


def expected(stream: bytes) -> list[dict]:
    core = Translator(EnrichedEncoder([], session_id="S"), rates=RateCard.bundled(), options=Options())
    core.feed(stream, 0.0)
    core.end(0.0)
    return comparable(core.take_output())


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1])
    return 0


async def client(path: str, stream: bytes, want: list[dict], stats: dict[str, int]) -> None:
    async with await anyio.connect_unix(path) as sock, anyio.create_task_group() as tg:

        async def send() -> None:
            await sock.send(stream)
            await sock.send_eof()

        tg.start_soon(send)
        out = bytearray()
        try:
            while True:
                out += await sock.receive()
        except anyio.EndOfStream:
            pass
    got = comparable(bytes(out))
    stats["frames"] += len(got)
    stats["ok" if got == want else "bad"] += 1


async def load(path: str, streams: list[tuple[bytes, list[dict]]], total: int, concurrency: int) -> dict[str, int]:
    stats = {"ok": 0, "bad": 0, "frames": 0}
    limit = anyio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            stream, want = streams[i % len(streams)]
            await client(path, stream, want, stats)

    async with anyio.create_task_group() as tg:
        for i in range(total):
            await limit.acquire()
            limit.release()
            tg.start_soon(one, i)
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=100)
    args = ap.parse_args()
    streams = [(p.read_bytes(), expected(p.read_bytes())) for p in sorted((ROOT / "fixtures").glob("*.events.jsonl"))]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "translator.sock")
        server = subprocess.Popen(
            [TRANSLATOR, "--listen", f"unix:{path}", "--session-id", "S", "--max-connections", "256"],
            stderr=subprocess.PIPE,
        )
        try:
            while not os.path.exists(path):
                time.sleep(0.02)
            peak = [0]
            done = threading.Event()

            def watch() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], peak_rss_kib(server.pid))
                    done.wait(0.05)

            watcher = threading.Thread(target=watch)
            watcher.start()
            start = time.perf_counter()
            stats = anyio.run(load, path, streams, args.connections, args.concurrency)
            elapsed = time.perf_counter() - start
            done.set()
            watcher.join()
        finally:
            server.terminate()
            server.wait()
    print(
        f"service load: {args.connections} connections, {args.concurrency} at once, over a unix socket\n"
        f"  {stats['ok']} outputs correct, {stats['bad']} wrong\n"
        f"  {args.connections / elapsed:8.0f} connections/s  {stats['frames'] / elapsed:8.0f} frames/s"
        f"  ({elapsed:.2f} s)\n"
        f"  service peak RSS {peak[0] / 1024:.1f} MiB"
    )
    if stats["bad"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
