"""The results table as a Delta Lake table, through the installed command: two batches at once
into one table keep every row (local disk, and S3: moto on loopback, delta-rs's conditional
PUT); a batch is one commit; an unchanged rerun commits nothing; an older schema is evolved, a
Parquet dataset of the writer before converted once, a damaged file named, a path with `[...]`
written and reported, a memory limit one line and 71: never an internal error."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_fixtures import DAY, RUN, host
from support_processes import TRANSLATOR, run

pytestmark = pytest.mark.slow
BUCKET = "tables"


def rows(uri: str, options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The table's current version as delta-rs reads it, in (source, run_index) order."""
    from deltalake import DeltaTable

    found = DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist()
    return sorted(found, key=lambda r: (r["source"], r["run_index"]))


def versions(uri: str, options: dict[str, str] | None = None) -> list[str]:
    from deltalake import DeltaTable

    return [c["operation"] for c in reversed(DeltaTable(uri, storage_options=options).history())]


def batches_at_once(table: str, roots: list[Path], env: dict[str, str] | None = None) -> None:
    writers = [subprocess.Popen([TRANSLATOR, "--results-table", table, str(r)], stdin=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env) for r in roots]
    for w in writers:
        _, err = w.communicate(timeout=180)
        assert w.returncode == 0, err


def test_two_batches_at_once_on_local_disk_keep_every_row_and_each_is_one_commit(tmp_path: Path) -> None:
    roots = [host(tmp_path / name, 12) for name in ("x", "y", "z")]
    table = str(tmp_path / "table")
    batches_at_once(table, roots)
    found = rows(table)
    assert len(found) == 72 and {r["source"].split("/")[-3] for r in found} == {"x", "y", "z"}
    assert versions(table).count("MERGE") == 3  # each batch one commit (after the table's creation)

    again = run("--results-table", table, str(roots[0]), timeout=120)
    assert again.returncode == 0, again.stderr
    assert rows(table) == found
    (roots[1] / "run-0" / "stdout.ndjson").write_bytes(RUN)  # one run now, not two
    (roots[1] / "run-1" / "stdout.ndjson").write_bytes(b"")  # none
    assert run("--results-table", table, str(roots[1]), timeout=120).returncode == 0
    after = {(r["source"], r["run_index"]) for r in rows(table)}
    y0, y1 = str(roots[1] / "run-0" / "stdout.ndjson"), str(roots[1] / "run-1" / "stdout.ndjson")
    assert (y0, 0) in after and (y0, 1) not in after and not any(s == y1 for s, _ in after)
    assert len(after) == 72 - 1 - 2


def test_an_unchanged_rerun_changes_no_row_and_adds_no_file(tmp_path: Path) -> None:
    table, logs = tmp_path / "table", host(tmp_path / "logs", 5)
    assert run("--out-dir", str(tmp_path / "out"), "--results-table", str(table), str(logs), timeout=120).returncode == 0
    files = sorted(p.relative_to(table).as_posix() for p in table.rglob("*.parquet"))
    before = rows(str(table))
    again = run("--out-dir", str(tmp_path / "out"), "--results-table", str(table), str(logs), timeout=120)
    assert again.returncode == 0 and b"0 translated, 5 skipped" in again.stderr
    assert rows(str(table)) == before
    assert sorted(p.relative_to(table).as_posix() for p in table.rglob("*.parquet")) == files


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[Any, dict[str, str]]]:
    """S3 on 127.0.0.1 (moto's server): fsspec finds it through FSSPEC_S3, delta-rs through the
    options the translator derives from it."""
    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host_, port = server.get_host_and_port()
    conf = {"endpoint_url": f"http://{host_}:{port}", "key": "test", "secret": "test"}
    env = {**os.environ, "FSSPEC_S3": json.dumps(conf), "AWS_DEFAULT_REGION": "us-east-1"}
    fs = S3FileSystem(skip_instance_cache=True, **conf)
    fs.mkdir(BUCKET)
    options = {"AWS_ENDPOINT_URL": conf["endpoint_url"], "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    try:
        yield env, options
    finally:
        server.stop()


def test_two_batches_at_once_on_s3_keep_every_row(s3: tuple[dict[str, str], dict[str, str]], tmp_path: Path) -> None:
    env, options = s3
    roots = [host(tmp_path / name, 10, runs=3) for name in ("a", "b", "c")]
    table = f"s3://{BUCKET}/results"
    batches_at_once(table, roots, env)
    found = rows(table, options)
    assert len(found) == 90 and {r["source"].split("/")[-3] for r in found} == {"a", "b", "c"}
    proc = subprocess.run([TRANSLATOR, "report", table, "--format", "json"], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"] == 90


def legacy(table: Path, rows_: list[dict[str, Any]], drop: tuple[str, ...] = ()) -> None:
    """A table as the writer before left it: a Parquet dataset, a partition a day (columns of an
    older schema dropped)."""
    import pyarrow.parquet as pq

    from translator.table.parquet import table as arrow_table

    folder = table / "date=2025-11-30"
    folder.mkdir(parents=True)
    pq.write_table(arrow_table(rows_).drop_columns(["date", *drop]), folder / "part-0.parquet")


def old_rows(n: int) -> list[dict[str, Any]]:
    return [{"source": f"/old/s{i}.ndjson", "run_index": 0, "session_id": f"old-{i}", "subtype": "success",
             "is_error": False, "num_turns": 1, "input_tokens": 10, "output_tokens": 5, "total_cost_usd": 0.5,
             "duration_ms": 100, "duration_source": "wall", "model": "m", "models": ["m"], "tool_calls": 0,
             "log_mtime_ms": DAY * 1000, "date": "2025-11-30"} for i in range(n)]


def test_an_older_schemas_parquet_dataset_is_converted_once_and_said(tmp_path: Path) -> None:
    table = tmp_path / "table"
    legacy(table, old_rows(3), drop=("models",))  # the schema before `models` (its KeyError, 70, on every write)
    (table / "date=2025-11-30" / "part-x.parquet").write_bytes(b"not parquet")  # and a damaged part
    report = run("report", str(table), "--format", "json", timeout=120)  # read as it is, before any write
    assert report.returncode == 66, report.stderr
    (table / "date=2025-11-30" / "part-x.parquet").unlink()
    assert json.loads(run("report", str(table), "--format", "json", timeout=120).stdout)["runs"] == 3
    (table / "date=2025-11-30" / "part-x.parquet").write_bytes(b"not parquet")

    proc = run("--results-table", str(table), str(host(tmp_path / "logs", 2)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.decode().splitlines() if "Delta" in line]
    assert said == [f"translator: --results-table {table}: the Parquet dataset of 1 files and 3 runs converted to a "
                    f"Delta table (its files removed); 1 not Parquet, left where they were, unread: "
                    f"{table}/date=2025-11-30/part-x.parquet (" + said[0].split("unread: ")[1].split(" (", 1)[1]]
    found = rows(str(table))
    assert len(found) == 3 + 4 and [r["models"] for r in found if r["source"].startswith("/old/")] == [None] * 3
    assert not (table / "date=2025-11-30" / "part-0.parquet").exists()
    again = run("--results-table", str(table), str(tmp_path / "logs"), timeout=120)
    assert again.returncode == 0 and b"Delta" not in again.stderr  # once
    assert len(rows(str(table))) == 7


def test_a_delta_table_of_an_older_schema_gains_the_new_columns(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from translator.table.parquet import table as arrow_table

    table = str(tmp_path / "table")
    write_deltalake(table, arrow_table(old_rows(2)).drop_columns(["models", "tool_calls"]), partition_by=["date"])
    proc = run("--results-table", table, str(host(tmp_path / "logs", 1)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = rows(table)
    assert [(r["models"], r["tool_calls"]) for r in found[:2]] == [(None, None)] * 2
    assert found[2]["models"] == ["claude-sonnet-4-5"] or isinstance(found[2]["models"], list)
    assert pa  # (pyarrow wrote the older table's rows)


def test_a_damaged_file_of_the_table_is_one_line_never_an_internal_error(tmp_path: Path) -> None:
    table = tmp_path / "table"
    logs = host(tmp_path / "logs", 3)
    assert run("--results-table", str(table), str(logs), timeout=120).returncode == 0
    (part,) = list(table.rglob("*.parquet"))
    part.write_bytes(b"PAR1" + b"\0" * 64)
    (logs / "run-0" / "stdout.ndjson").write_bytes(RUN)
    for args in (["--results-table", str(table), str(logs)], ["report", str(table)]):
        proc = run(*args, timeout=120)
        lines = proc.stderr.decode().splitlines()
        assert proc.returncode in (65, 66) and b"internal error" not in proc.stderr, proc.stderr
        assert lines[-1].startswith(f"translator: {'--results-table ' if args[0] != 'report' else ''}{table}"), lines


def test_a_path_with_brackets_is_a_path(tmp_path: Path) -> None:
    table = tmp_path / "results [2025]" / "t[1]"
    assert run("--results-table", str(table), str(host(tmp_path / "logs", 2)), timeout=120).returncode == 0
    proc = run("report", str(table), "--format", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"] == 4


@pytest.mark.parametrize("command", ["write", "report"])
def test_a_memory_limit_is_one_line_and_71(tmp_path: Path, command: str) -> None:
    """Under `ulimit -v` short of what delta-rs maps (it aborted, 134, or hung): one line, 71,
    before the table is touched; with room, the same command succeeds."""
    table = tmp_path / "table"
    logs = host(tmp_path / "logs", 3)
    assert run("--results-table", str(table), str(logs), timeout=120).returncode == 0
    args = ["--results-table", str(table), "--force", str(logs)] if command == "write" else ["report", str(table)]
    for limit in (600, 1000, 1800):  # MiB of address space (600: deltalake's library cannot even be mapped)
        proc = subprocess.run(["bash", "-c", f'ulimit -v {limit * 1024} && exec "$0" "$@"', TRANSLATOR, *args],
                              capture_output=True, timeout=120)
        lines = [line for line in proc.stderr.decode().splitlines() if "translated" not in line]
        assert (proc.returncode, len(lines)) == (71, 1), (limit, proc.returncode, proc.stderr[-2000:])
        assert lines[0].startswith("translator: out of memory: ") and "ulimit -v" in lines[0], lines
    assert run(*args, timeout=120).returncode == 0
