"""Object stores that fail, through the installed command: a real S3 API on loopback (moto's
server) behind a proxy that answers 500, cuts a body in half, stalls one halfway or never
answers a PUT (support_store.py), a dead port and one that never completes a connect. Each fault
is an I/O error: one line naming the object, 74, no traceback, within the timeout the user set;
a stop signal while a store keeps a request waiting ends the batch with its summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES
from support_processes import TRANSLATOR, poll
from support_store import FaultyProxy, FullQueue, dead_port

pytestmark = pytest.mark.slow
BUCKET = "faulty"
DATA = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes() * 20
SUMMARY = "translator: 2 translated, 0 skipped (up to date), 1 failed;"


@pytest.fixture(scope="module")
def moto() -> Iterator[tuple[str, int]]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server.get_host_and_port()
    finally:
        server.stop()


@pytest.fixture
def proxy(moto: tuple[str, int]) -> Iterator[FaultyProxy]:
    """A fresh proxy (no faults) and a bucket with three logs, in/s0..s2.ndjson."""
    from s3fs import S3FileSystem

    fs = S3FileSystem(skip_instance_cache=True, endpoint_url=f"http://{moto[0]}:{moto[1]}", key="test", secret="test")
    if fs.exists(BUCKET):
        fs.rm(BUCKET, recursive=True)
    fs.mkdir(BUCKET)
    for n in range(3):
        fs.pipe_file(f"{BUCKET}/in/s{n}.ndjson", DATA)
    faulty = FaultyProxy(moto)
    yield faulty
    faulty.stop()


def env(endpoint: str, **extra: str) -> dict[str, str]:
    conf = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
    return {**os.environ, "FSSPEC_S3": json.dumps(conf), "AWS_DEFAULT_REGION": "us-east-1", **extra}


def start(endpoint: str, *args: str, **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([TRANSLATOR, *args], env=env(endpoint, **extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes], timeout: float = 60) -> tuple[int, list[str], float]:
    """Status, stderr's lines and the seconds the command took."""
    began = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"still running after {timeout} s: {err.decode(errors='replace')}")
    return proc.returncode, err.decode().splitlines(), time.monotonic() - began


def url(proxy: FaultyProxy, key: str) -> str:
    return f"s3://{BUCKET}/{key}"


@pytest.mark.parametrize(("fault", "said"), [
    ("500", "the store answered 500 InternalError: We encountered an internal error. Please try again."),
    ("cut", "ClientPayloadError: Response payload is not completed"),  # 65, a content error, before
    ("stall", "no answer in 1 s (Read timeout on endpoint URL"),  # IndexError after 77 s, before
])
def test_a_get_that_fails_fails_its_file_in_one_line_naming_the_object(proxy: FaultyProxy, tmp_path: Path,
                                                                       fault: Any, said: str) -> None:
    proxy.fail("GET", f"/{BUCKET}/in/s1.ndjson", fault)
    status, lines, took = finish(start(proxy.url, "--store-timeout", "1", "--out-dir", str(tmp_path / "out"),
                                       f"s3://{BUCKET}/in/"))
    assert status == 74, lines
    assert len(lines) == 2 and lines[0].startswith(SUMMARY), lines
    assert lines[1].startswith(f"translator: failed: s1.ndjson: s3://{BUCKET}/in/s1.ndjson: {said}"), lines
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == [
        "s0.enriched.jsonl", "s2.enriched.jsonl"]
    assert took < 30


def test_a_failing_get_on_a_dask_cluster_prints_no_worker_traceback(proxy: FaultyProxy, tmp_path: Path) -> None:
    proxy.fail("GET", f"/{BUCKET}/in/s1.ndjson", "cut")
    status, lines, _ = finish(start(proxy.url, "--cluster", "local:1", "--out-dir", str(tmp_path / "out"),
                                    f"s3://{BUCKET}/in/"), timeout=120)
    assert status == 74, lines
    assert len(lines) == 2 and lines[0].startswith(SUMMARY), lines  # no "Compute Failed", no traceback
    assert lines[1].startswith(f"translator: failed: s1.ndjson: s3://{BUCKET}/in/s1.ndjson: ClientPayloadError:"), lines


def test_a_put_never_answered_fails_its_file_after_the_timeout(proxy: FaultyProxy) -> None:
    proxy.fail("PUT", f"/{BUCKET}/out/s1.enriched.jsonl", "hang")
    status, lines, took = finish(start(proxy.url, "--out-dir", f"s3://{BUCKET}/out", f"s3://{BUCKET}/in/",
                                       TRANSLATOR_STORE_TIMEOUT="1"))
    assert status == 74, lines
    assert len(lines) == 2 and lines[0].startswith(SUMMARY), lines
    assert lines[1].startswith(f"translator: failed: s1.ndjson: s3://{BUCKET}/out/s1.enriched.jsonl: no answer in 1 s"), lines
    assert took < 30  # 3 tries of 1 s and their backoff; 300 s to 10 min, before


def test_a_put_whose_body_is_never_read_fails_its_file_after_the_timeout(proxy: FaultyProxy, moto: tuple[str, int]) -> None:
    from s3fs import S3FileSystem

    fs = S3FileSystem(skip_instance_cache=True, endpoint_url=f"http://{moto[0]}:{moto[1]}", key="test", secret="test")
    fs.pipe_file(f"{BUCKET}/in/s1.ndjson", DATA * 300)  # an output of ~17 MB: more than the sockets buffer
    proxy.fail("PUT", f"/{BUCKET}/out/s1.enriched.jsonl", "deaf")
    status, lines, took = finish(start(proxy.url, "--store-timeout", "1", "--out-dir", f"s3://{BUCKET}/out",
                                       f"s3://{BUCKET}/in/"))
    assert status == 74, lines
    assert lines[1].startswith(f"translator: failed: s1.ndjson: s3://{BUCKET}/out/s1.enriched.jsonl: no answer in 1 s"), lines
    assert took < 40  # forever, before: aiohttp has no write timeout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_a_put_hangs_ends_the_batch_with_its_summary(proxy: FaultyProxy, signum: int) -> None:
    proxy.fail("PUT", f"/{BUCKET}/out/s1.enriched.jsonl", "hang")
    proc = start(proxy.url, "--store-timeout", "60", "--jobs", "2", "--out-dir", f"s3://{BUCKET}/out",
                 f"s3://{BUCKET}/in/")
    poll(lambda: ("PUT", f"/{BUCKET}/out/s1.enriched.jsonl") in proxy.seen, 60)
    proc.send_signal(signum)
    status, lines, took = finish(proc, timeout=30)
    assert status == 128 + signum, lines
    assert len(lines) == 1 and lines[0].endswith(" (interrupted)"), lines
    assert took < 10  # not the 60 s the PUT may wait


@pytest.mark.parametrize("where", ["dead", "unreachable"])
def test_a_store_that_cannot_be_reached_is_an_io_error_naming_it(tmp_path: Path, where: str) -> None:
    queue = FullQueue() if where == "unreachable" else None
    port = queue.port if queue is not None else dead_port()
    try:
        status, lines, took = finish(start(f"http://127.0.0.1:{port}", "--store-timeout", "1",
                                           "--out-dir", str(tmp_path / "out"), f"s3://{BUCKET}/in/"))
    finally:
        if queue is not None:
            queue.close()
    assert status == 74, lines  # 70 "internal error" (dead), 66 "No such file or directory" (unreachable), before
    assert len(lines) == 1 and lines[0].startswith(f"translator: s3://{BUCKET}/in"), lines
    said = "no answer in 1 s (Connect timeout" if where == "unreachable" else "EndpointConnectionError: Could not connect"
    assert said in lines[0], lines
    assert took < 30


def test_report_on_a_store_that_cannot_be_reached_is_an_io_error_naming_it() -> None:
    status, lines, took = finish(start(f"http://127.0.0.1:{dead_port()}", "report", f"s3://{BUCKET}/table"))
    assert (status, len(lines)) == (74, 1), lines  # 70, "internal error", before
    assert lines[0].startswith(f"translator: s3://{BUCKET}/table: Error performing GET http://127.0.0.1:"), lines
    assert lines[0].endswith("tcp connect error: Connection refused (os error 111)"), lines  # (delta-rs's client)
    assert took < 30


def test_a_stop_signal_while_the_store_is_listed_ends_with_the_summary(tmp_path: Path) -> None:
    queue = FullQueue()
    try:
        proc = start(f"http://127.0.0.1:{queue.port}", "--out-dir", str(tmp_path / "out"), f"s3://{BUCKET}/in/")
        time.sleep(2)  # connecting, for up to 30 s (the default timeout)
        proc.send_signal(signal.SIGTERM)
        status, lines, took = finish(proc, timeout=30)
    finally:
        queue.close()
    assert status == 128 + signal.SIGTERM, lines
    assert len(lines) == 1 and lines[0].startswith("translator: 0 translated, 0 skipped (up to date), 0 failed;"), lines
    assert lines[0].endswith(" (interrupted)") and took < 10


def table_rows(proxy: FaultyProxy, moto: tuple[str, int]) -> list[Any]:
    import pyarrow.dataset as ds
    from pyarrow.fs import FSSpecHandler, PyFileSystem
    from s3fs import S3FileSystem

    fs = S3FileSystem(skip_instance_cache=True, endpoint_url=f"http://{moto[0]}:{moto[1]}", key="test", secret="test")
    dataset = ds.dataset(f"{BUCKET}/table", filesystem=PyFileSystem(FSSpecHandler(fs)), partitioning="hive")
    return sorted(dataset.to_table(columns=["source", "run_index"]).to_pylist(), key=lambda r: (r["source"], r["run_index"]))


def test_a_results_table_on_a_failing_store_is_left_as_it_was(proxy: FaultyProxy, moto: tuple[str, int]) -> None:
    status, lines, took = finish(start(proxy.url, "--results-table", f"s3://{BUCKET}/table", f"s3://{BUCKET}/in/"))
    # Before, the pool's workers freed the store client they inherited, and its finalizer took the
    # parent's connections off their shared event loop: "Task exception was never retrieved", and
    # the table's PUT hung for its timeout.
    assert (status, len(lines)) == (0, 1) and lines[0].startswith("translator: 3 translated"), lines
    assert took < 10
    before = table_rows(proxy, moto)
    assert len(before) == 3 * 20

    from s3fs import S3FileSystem

    fs = S3FileSystem(skip_instance_cache=True, endpoint_url=f"http://{moto[0]}:{moto[1]}", key="test", secret="test")
    fs.pipe_file(f"{BUCKET}/in/s0.ndjson", DATA * 2)  # a log changed: the write has rows to put
    proxy.fail("PUT", f"/{BUCKET}/table/", "500")
    status, lines, _ = finish(start(proxy.url, "--results-table", f"s3://{BUCKET}/table", f"s3://{BUCKET}/in/"))
    assert status == 74, "\n".join(lines)
    assert lines[1].startswith(f"translator: --results-table s3://{BUCKET}/table: s3://{BUCKET}/table: "), lines
    assert "500" in lines[1] and len(lines) == 2, lines
    assert table_rows(proxy, moto) == before  # (the old table was deleted before the new was written, before)

    proxy.clear()
    proxy.fail("PUT", f"/{BUCKET}/table/", "hang")
    proc = start(proxy.url, "--results-table", f"s3://{BUCKET}/table", f"s3://{BUCKET}/in/")
    poll(lambda: any(m == "PUT" and "/table/" in p for m, p in proxy.seen), 60)
    proc.send_signal(signal.SIGTERM)
    status, lines, took = finish(proc, timeout=30)
    assert status == 128 + signal.SIGTERM, lines
    assert lines[-1] == f"translator: --results-table s3://{BUCKET}/table: not written (interrupted)", lines
    assert took < 10 and table_rows(proxy, moto) == before
