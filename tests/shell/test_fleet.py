"""Fleet scale, on real components: S3 on loopback (moto's server, read and written by s3fs),
a Dask LocalCluster of two worker processes, and the Parquet table read back by DuckDB."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import FIXTURES, ROOT, SCENARIOS, events, frames_of, recoveries
from support_processes import TRANSLATOR, children, poll, run, running

from bench.gen import generate

pytestmark = pytest.mark.slow
BUCKET = "fleet"


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """A real S3 API on 127.0.0.1 (moto in server mode); fsspec (here, in every translator
    process and in the Dask workers) finds it through FSSPEC_S3."""
    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    conf = {"endpoint_url": f"http://{host}:{port}", "key": "test", "secret": "test"}
    saved = {k: os.environ.get(k) for k in ("FSSPEC_S3", "AWS_DEFAULT_REGION")}
    os.environ.update(FSSPEC_S3=json.dumps(conf), AWS_DEFAULT_REGION="us-east-1")
    fs = S3FileSystem(skip_instance_cache=True, **conf)
    fs.mkdir(BUCKET)
    try:
        yield fs
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture(scope="module")
def cluster(s3: Any) -> Iterator[Any]:
    """A Dask LocalCluster of two worker processes (started after S3, so they see it)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1", scheduler_port=0) as lc, Client(lc) as client:
        yield client


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[bytes]:
    return run(*args, timeout=timeout)


def fleet_logs(root: Path) -> dict[str, bytes]:
    """A fleet's layout: one stdout.ndjson per session, some gzipped, two sessions per host."""
    files = {}
    for n, scenario in enumerate(SCENARIOS):
        data = events(scenario)
        files[f"logs/host-{n % 3}/session-{n}/stdout.ndjson"] = gzip.compress(data, mtime=0) if n % 4 == 1 else data
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def objects(fs: Any, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {p.removeprefix(prefix + "/"): fs.cat_file(p) for p in fs.find(prefix)}


def outputs(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def made(files: dict[str, bytes], logs: str | None = None) -> dict[str, bytes]:
    """The outputs, without the up-to-date records (named for the run that wrote them); with
    `logs`, the root of their inputs, each log's session id (of its full path or URL) as `S`."""
    from translator.encoders.observed import session_id_of as session_id

    def unnamed(name: str, data: bytes) -> bytes:
        source = f"{logs}/{name.removesuffix('.enriched.jsonl')}.ndjson"
        return data if logs is None else data.replace(session_id(source).encode(), b"S")

    return {k: unnamed(k, v) for k, v in files.items() if not k.startswith(".translator.done/")}


def recorded(files: dict[str, bytes]) -> list[bytes]:
    """The records' entries, one per output committed, whatever chunk and run wrote them."""
    return sorted(e for k, v in files.items() if k.startswith(".translator.done/") for e in v.splitlines()[1:])


def test_s3_in_and_out_on_the_cluster_is_the_local_batch(s3: Any, cluster: Any, tmp_path: Path) -> None:
    local = tmp_path / "local"
    for name, data in fleet_logs(local).items():
        s3.pipe_file(f"{BUCKET}/{name}", data)
    s3.pipe_file(f"{BUCKET}/logs/host-9/session-x/stdout.ndjson", gzip.compress(events("thinking"))[:-12])  # poison
    expected = cli("--out-dir", str(tmp_path / "out"), str(local / "logs/**/stdout.ndjson"))
    assert expected.returncode == 0, expected.stderr

    address = cluster.scheduler.address
    proc = cli("--out-dir", f"s3://{BUCKET}/translated", "--cluster", address, "--results-table", f"s3://{BUCKET}/results",
               f"s3://{BUCKET}/logs/**/stdout.ndjson")
    assert proc.returncode == 65, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith(f"translator: {len(SCENARIOS)} translated, 0 skipped (up to date), 1 failed;")
    assert lines[1].startswith("translator: failed: host-9/session-x/stdout.ndjson: broken gzip:")
    got = objects(s3, f"{BUCKET}/translated")
    visible = made(got)
    assert made(got, f"s3://{BUCKET}/logs") == made(outputs(tmp_path / "out"), str(local / "logs"))
    assert len(visible) == len(SCENARIOS) and "host-9/session-x/stdout.enriched.jsonl" not in got

    from deltalake import DeltaTable

    conf = json.loads(os.environ["FSSPEC_S3"])
    table = DeltaTable(f"s3://{BUCKET}/results", storage_options={
        "AWS_ENDPOINT_URL": conf["endpoint_url"], "AWS_ACCESS_KEY_ID": conf["key"], "AWS_SECRET_ACCESS_KEY": conf["secret"],
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}).to_pyarrow_table()
    assert sorted(table.column("session_id").to_pylist()) == sorted(
        f["session_id"] for data in visible.values() for f in frames_of(data) if f["type"] == "result")
    report = subprocess.run([TRANSLATOR, "report", f"s3://{BUCKET}/results"], capture_output=True, timeout=120)
    assert report.stdout.startswith(f"{table.num_rows} runs in {len(SCENARIOS)} logs ({len(SCENARIOS)} sessions)".encode()), report.stderr

    again = cli("--out-dir", f"s3://{BUCKET}/translated", "--cluster", address, f"s3://{BUCKET}/logs/**/stdout.ndjson")
    assert f"0 translated, {len(SCENARIOS)} skipped".encode() in again.stderr
    forced = cli("--out-dir", f"s3://{BUCKET}/translated", "--force", f"s3://{BUCKET}/logs/**/stdout.ndjson")
    assert forced.returncode == 65 and f"{len(SCENARIOS)} translated".encode() in forced.stderr  # the local pool on S3
    after = objects(s3, f"{BUCKET}/translated")
    assert made(after) == visible  # byte-identical
    assert recorded({k: v for k, v in after.items() if k not in got}) == recorded(got)  # and recorded alike
    third = cli("--out-dir", f"s3://{BUCKET}/translated", f"s3://{BUCKET}/logs/**/stdout.ndjson")
    assert f"0 translated, {len(SCENARIOS)} skipped".encode() in third.stderr
    records = [k for k in objects(s3, f"{BUCKET}/translated") if k.startswith(".translator.done/") and k.endswith(".done")]  # (and the table's mark)
    assert records and not set(records) & set(got)  # the first run's records were dead, and removed
    usage = subprocess.run([TRANSLATOR, "report"], capture_output=True, timeout=60)
    assert (usage.returncode, usage.stderr) == (64, b"translator report: the following arguments are required: RESULTS\n")


def test_a_worker_killed_mid_job_loses_nothing_and_doubles_nothing(cluster: Any, tmp_path: Path) -> None:
    src = tmp_path / "logs"
    generate(str(tmp_path / "big.ndjson"), 6)
    for n in range(16):
        (src / f"s{n}").mkdir(parents=True)
        shutil.copy(tmp_path / "big.ndjson", src / f"s{n}" / "stdout.ndjson")
    expected = cli("--out-dir", str(tmp_path / "expected"), "--jobs", "2", str(src))
    assert expected.returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(out), "--cluster", cluster.scheduler.address, str(src)],
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list(out.rglob("*.enriched.jsonl")):  # the job is under way
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    victim = next(iter(cluster.run(os.getpid).values()))
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    # The lost worker's chunk is made again elsewhere: each file once in the summary.
    assert re.search(rb"translator: 16 translated, 0 skipped \(up to date\), 0 failed", err), err
    got, want = outputs(out), outputs(tmp_path / "expected")
    assert made(got) == made(want)  # each output once, whole, the same bytes
    assert not list(out.rglob("*.tmp"))
    # A chunk the lost worker had committed has a record of its own before the one made again
    # (records are named at their commit); the next run finds it dead and removes it.
    again = cli("--out-dir", str(out), str(src))
    assert b"translator: 0 translated, 16 skipped (up to date)" in again.stderr, again.stderr
    assert recorded(outputs(out)) == recorded(want)  # recorded once, under the same keys
    cluster.wait_for_workers(2, timeout=60)


def test_the_files_reports_come_back_from_the_cluster_in_the_log_format(cluster: Any, tmp_path: Path) -> None:
    data, said = recoveries()
    (tmp_path / "cut.ndjson").write_bytes(b"not json\n" + data)
    proc = cli("--log-format", "json", "--out-dir", str(tmp_path / "out"), "--cluster", cluster.scheduler.address,
               str(tmp_path / "cut.ndjson"))
    assert proc.returncode == 0, proc.stderr
    *reports, summary = [json.loads(line) for line in proc.stderr.splitlines()]
    assert [(r["line"], r["kind"], r["level"]) for r in reports] == [
        (1, "invalid_json", "warning"), *((line + 1, kind, level) for (line, kind), level in zip(said, ["info", "warning"], strict=True))
    ]
    assert all(r["source"].endswith("cut.ndjson") for r in reports)
    assert summary["message"].startswith("1 translated, 0 skipped (up to date), 0 failed")


def result_frames(out: Path) -> list[tuple[str, int, dict[str, Any]]]:
    found = []
    for path in sorted(out.rglob("*.enriched.jsonl")):
        results = [f for f in frames_of(path.read_bytes()) if f["type"] == "result"]
        found += [(path.relative_to(out).as_posix(), i, frame) for i, frame in enumerate(results)]
    return found


def test_the_results_table_is_the_result_frames_row_for_row(tmp_path: Path) -> None:
    import duckdb

    fleet_logs(tmp_path)
    stamped = b"".join(line.rstrip(b"}") + f',"ts":{1764460800 + i}}}\n'.encode()  # 2025-11-30, recorded
                       for i, line in enumerate(events("tool_use_two_turns").splitlines()))
    (tmp_path / "logs/stamped/stdout.ndjson").parent.mkdir()
    (tmp_path / "logs/stamped/stdout.ndjson").write_bytes(stamped)
    table, out = tmp_path / "table", tmp_path / "out"
    proc = cli("--out-dir", str(out), "--results-table", str(table), str(tmp_path / "logs"))
    assert proc.returncode == 0, proc.stderr
    from deltalake import DeltaTable

    db = duckdb.connect()
    db.register("runs", DeltaTable(str(table)).to_pyarrow_dataset())
    rows = db.execute("select * from runs order by source, run_index").fetchall()
    names = [d[0] for d in db.description]
    rows = [dict(zip(names, r, strict=True)) for r in rows]
    frames = result_frames(out)
    assert len(rows) == len(frames) > len(SCENARIOS)
    for row, (relative, index, frame) in zip(rows, frames, strict=True):
        assert row["source"] == str(tmp_path / "logs" / relative.replace(".enriched.jsonl", ".ndjson"))
        assert row["run_index"] == index
        for key in ("session_id", "subtype", "is_error", "num_turns", "duration_ms", "duration_api_ms", "total_cost_usd"):
            assert row[key] == frame[key], (relative, key)
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            assert row[key] == frame["usage"].get(key), (relative, key)
        assert row["error"] == frame.get("error")
    by_source = {r["source"].split("/logs/")[1]: r for r in rows}
    recorded = by_source["stamped/stdout.ndjson"]
    assert recorded["duration_source"] == "recorded" and str(recorded["date"]) == "2025-11-30"
    assert recorded["first_ts"].timestamp() == 1764460800 and recorded["last_ts"] > recorded["first_ts"]
    assert recorded["model"] == "claude-sonnet-4-5" and recorded["models"] == ["claude-sonnet-4-5"]
    assert all(r["first_ts"] is None for r in rows if r["duration_source"] != "recorded")

    # The queries of docs/fleet.md run as written.
    readme = (ROOT / "docs" / "fleet.md").read_text()
    queries = readme.split("```sql\n")[1:]
    assert len(queries) == 3
    for query in queries:  # (over the table's current version, registered as `runs`, as the docs have it)
        db.execute(query.split("```")[0]).fetchall()

    # Without --out-dir, and from the records when up to date: the same table.
    first = db.execute("select * from runs order by source, run_index").fetchall()
    for args in (["--results-table", str(table)], ["--out-dir", str(out), "--results-table", str(table)]):
        shutil.rmtree(table)
        assert cli(*args, str(tmp_path / "logs")).returncode == 0
        db.register("runs", DeltaTable(str(table)).to_pyarrow_dataset())
        assert db.execute("select * from runs order by source, run_index").fetchall() == first
    assert b"0 translated" in cli("--out-dir", str(out), "--results-table", str(table), str(tmp_path / "logs")).stderr

    report = subprocess.run([TRANSLATOR, "report", str(table), "--html", str(tmp_path / "r.html")],
                            capture_output=True, timeout=120)
    assert report.returncode == 0, report.stderr
    text = report.stdout.decode()
    logs = len(SCENARIOS) + 1
    assert text.startswith(f"{len(rows)} runs in {logs} logs ({logs} sessions), {sum(r['is_error'] for r in rows)} failed")
    assert "\nclaude-sonnet-4-5 " in text and "p95 ms" in text and "\n2025-11-30 " in text
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") >= 2 and "<script" not in page and "http" not in page.split("<svg")[0]
    # a page that cannot be written is said before the report, not after printing it whole (73)
    nowhere = tmp_path / "missing" / "r.html"
    refused = subprocess.run([TRANSLATOR, "report", str(table), "--html", str(nowhere)], capture_output=True, timeout=120)
    assert (refused.returncode, refused.stdout) == (73, b"")
    assert refused.stderr.decode() == f"translator: {nowhere}: No such file or directory\n"
    assert sorted(p.name for p in tmp_path.glob("*.html*")) == ["r.html"]  # no temporary left


def test_a_missing_extra_is_named_in_one_line(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "a.ndjson")
    blocked = "import sys; sys.modules['pyarrow'] = None; from translator.cli import run; sys.argv[0] = 'translator'; run()"
    proc = subprocess.run([sys.executable, "-c", blocked, "--results-table", str(tmp_path / "t"), str(tmp_path / "a.ndjson")],
                          capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr.decode()) == (
        69, "translator: --results-table: pyarrow is not installed: pip install '.[table]' in the translator's clone\n")


def test_the_results_table_needs_only_its_own_extra(tmp_path: Path) -> None:
    """`--results-table` on local disk asks for pyarrow and deltalake alone (the table extra): neither Dask,
    fsspec nor the report's packages are imported."""
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "a.ndjson")
    without = ("dask", "distributed", "fsspec", "s3fs", "duckdb", "matplotlib")
    blocked = (f"import sys; [sys.modules.__setitem__(m, None) for m in {without!r}]; "
               "from translator.cli import run; sys.argv[0] = 'translator'; run()")
    proc = subprocess.run([sys.executable, "-c", blocked, "--results-table", str(tmp_path / "t"), str(tmp_path / "a.ndjson")],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "t").rglob("*.parquet"))) == 1
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [d.split(">")[0] for d in extras["table"]] == ["pyarrow", "deltalake"]


def test_report_names_its_own_extra_and_a_missing_dataset_in_one_line(tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['duckdb'] = None; from translator.cli import run; sys.argv[0] = 'translator'; run()"
    proc = subprocess.run([sys.executable, "-c", blocked, "report", str(tmp_path)], capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr.decode()) == (
        69, "translator: report: duckdb is not installed: pip install '.[report]' in the translator's clone\n")
    missing = subprocess.run([TRANSLATOR, "report", str(tmp_path / "nothing")], capture_output=True, timeout=60)
    assert (missing.returncode, missing.stderr.decode()) == (66, f"translator: {tmp_path / 'nothing'}: No such file or directory\n")


def test_the_readme_documents_the_schema() -> None:
    from translator.table.parquet import COLUMNS

    readme = (ROOT / "docs" / "fleet.md").read_text()
    assert "\n".join(f"| `{n}` | `{k}` | {d} |" for n, k, d in COLUMNS) in readme


def test_an_io_error_is_retried_by_dask_then_reported(cluster: Any, tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "ok.ndjson")
    # Reading a process's own /proc/self/mem at offset 0 fails with EIO, in any worker, every time.
    proc = cli("--out-dir", str(tmp_path / "out"), "--cluster", cluster.scheduler.address,
               str(tmp_path / "ok.ndjson"), "/proc/self/mem")
    assert proc.returncode == 74, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("translator: 1 translated, 0 skipped (up to date), 1 failed;")
    assert lines[1] == "translator: failed: proc/self/mem: OSError: [Errno 5] Input/output error"
    assert (tmp_path / "out" / tmp_path.relative_to("/") / "ok.enriched.jsonl").exists()
    log = cluster.cluster.scheduler.transition_log
    mem = hashlib.sha1(b"/proc/self/mem").hexdigest()
    tries = [t for t in log if str(t[0]).endswith(f"-alone-{mem}") and t[1] == "processing"]
    assert len(tries) == 3, tries  # the first try alone and its two retries


def test_a_local_cluster_dies_with_the_batch(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    generate(str(tmp_path / "big.ndjson"), 6)
    for n in range(40):
        (src / f"s{n}").mkdir(parents=True)
        shutil.copy(tmp_path / "big.ndjson", src / f"s{n}" / "stdout.ndjson")
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(tmp_path / "out"), "--cluster", "local:2", str(src)],
                            stderr=subprocess.DEVNULL)
    poll(lambda: len(children(proc.pid)) >= 2, 120)  # the workers (and their resource tracker)
    family = children(proc.pid)
    family |= {grandchild for pid in family for grandchild in children(pid)}
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    poll(lambda: not any(running(pid) for pid in family), 60)




def small_sessions_on(cluster: Any, tmp_path: Path, count: int) -> subprocess.Popen[bytes]:
    """`count` copies of a small session translated on the cluster: the batch, ended well."""
    for n in range(count):
        (tmp_path / "logs" / f"s{n}").mkdir(parents=True)
        shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", tmp_path / "logs" / f"s{n}" / "stdout.ndjson")
    proc = subprocess.Popen([TRANSLATOR, "--out-dir", str(tmp_path / "out"), "--cluster", cluster.scheduler.address,
                             str(tmp_path / "logs")], stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0 and err.startswith(f"translator: {count} translated, 0 skipped".encode()), err
    return proc


def test_the_cluster_gets_a_task_per_chunk_of_files(cluster: Any, tmp_path: Path) -> None:
    """Counted on the scheduler: 600 small sessions are SHARES tasks a worker slot (the fewest
    that keep every core busy to the end: a Dask task costs ~10x a pool's), not 600."""
    from translator.shell.packing import SHARES

    proc = small_sessions_on(cluster, tmp_path, 600)
    log = cluster.cluster.scheduler.transition_log
    tasks = {str(t[0]) for t in log if str(t[0]).startswith(f"translate-{proc.pid}-")}
    slots = sum(cluster.nthreads().values())
    assert SHARES * slots <= len(tasks) <= SHARES * slots + 2, sorted(tasks)
    assert len(list((tmp_path / "out").rglob("*.enriched.jsonl"))) == 600


def test_the_cluster_holds_a_window_of_the_batch_largest_first(cluster: Any, tmp_path: Path) -> None:
    """Read off the scheduler: 3,000 small sessions are 12 chunks, of which at no time more than
    WINDOW a worker slot are waiting or running (all 12 were, sent at once), and they start in
    the order packed (largest first)."""
    from translator.shell.cluster import WINDOW

    proc = small_sessions_on(cluster, tmp_path, 3000)
    ours = [t for t in cluster.cluster.scheduler.transition_log if str(t[0]).startswith(f"translate-{proc.pid}-")]
    live, most = set(), 0
    for key, _, finish, *_ in ours:
        (live.add if finish in ("waiting", "queued", "processing", "no-worker") else live.discard)(key)
        most = max(most, len(live))
    window = WINDOW * sum(cluster.nthreads().values())
    assert len({t[0] for t in ours}) == 12 and most == window, (most, window)
    started = [int(str(key).split("-")[2]) for key, _, finish, *_ in ours if finish == "processing"]
    assert started == sorted(started) == list(range(12)), started


def test_a_prefix_of_many_objects_is_one_paginated_listing(s3: Any) -> None:
    """1,100 objects in 100 "folders": two pages of one listing, not a listing per folder."""
    from s3fs import S3FileSystem

    from translator.shell.fleet import Lister

    s3.pipe({f"{BUCKET}/many/host-{n % 100}/s{n}/stdout.ndjson": b"{}\n" for n in range(1100)})
    fs = S3FileSystem(skip_instance_cache=True, **json.loads(os.environ["FSSPEC_S3"]))  # nothing cached
    fs.connect()
    calls: list[str] = []
    fs.s3.meta.events.register("before-call.s3", lambda **kw: calls.append(kw["model"].name))
    found = Lister(fs, "s3", 30).files_under(f"{BUCKET}/many")
    assert len(found) == 1100 and all(f.size == 3 for f in found)
    assert calls == ["ListObjectsV2", "ListObjectsV2"]


def test_a_rerun_with_everything_up_to_date_reaches_no_cluster(tmp_path: Path) -> None:
    """Up-to-date files are settled from the records before any engine starts: a rerun where
    all are up to date sends no task, so it does not even connect (here: to nothing at all)."""
    fleet_logs(tmp_path)
    out = tmp_path / "out"
    assert cli("--out-dir", str(out), "--jobs", "1", str(tmp_path / "logs")).returncode == 0
    again = cli("--out-dir", str(out), "--cluster", "tcp://127.0.0.1:9", str(tmp_path / "logs"))
    assert again.returncode == 0, again.stderr
    assert again.stderr.decode().startswith(f"translator: 0 translated, {len(SCENARIOS)} skipped (up to date), 0 failed;")
    (out / "host-0" / "session-0" / "stdout.enriched.jsonl").unlink()  # one to do: now it must connect, and cannot
    refused = cli("--out-dir", str(out), "--cluster", "tcp://127.0.0.1:9", str(tmp_path / "logs"), timeout=120)
    assert (refused.returncode, refused.stdout) == (69, b"")  # a user's error, one line
    assert re.fullmatch(rb"translator: --cluster tcp://127.0.0.1:9: cannot connect: [^\n]+\n", refused.stderr), refused.stderr
