"""A file name that is not UTF-8 (Linux names are bytes) in a batch: its output is written under
the same bytes, its session id and up-to-date key are made from them, and wherever the name is
text (the results table, JSON logs, the summary) its undecodable bytes read `\\xNN`."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

import orjson
from support_fixtures import FIXTURES, frames_of, recoveries
from support_processes import run

from translator.encoders.observed import NAMESPACE
from translator.encoders.observed import session_id_of as session_id

NAME = b"caf\xe9 \xff.ndjson"  # Latin-1 bytes: not UTF-8


def test_a_name_that_is_not_utf8_is_translated_under_its_own_bytes(tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    src = tmp_path / "in"
    src.mkdir()
    data, _ = recoveries()
    data = b"not json\n" + data
    (src / "plain.ndjson").write_bytes(data)
    with open(os.path.join(os.fsencode(src), NAME), "wb") as f:
        f.write(data)
    out, table = tmp_path / "out", tmp_path / "table"
    proc = run("--log-format", "json", "--out-dir", str(out), "--results-table", str(table), str(src), timeout=120)
    assert proc.returncode == 0, proc.stderr
    *reports, summary = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert summary["message"].startswith("2 translated, 0 skipped (up to date), 0 failed")
    shown = f"{src}/caf\\xe9 \\xff.ndjson"
    assert {r["source"] for r in reports} == {shown, f"{src}/plain.ndjson"}

    assert sorted(os.listdir(os.fsencode(out))) == [b".translator.done", b"caf\xe9 \xff.enriched.jsonl", b"plain.enriched.jsonl"]
    odd = frames_of(Path(os.fsdecode(os.path.join(os.fsencode(out), b"caf\xe9 \xff.enriched.jsonl"))).read_bytes())
    plain = frames_of((out / "plain.enriched.jsonl").read_bytes())
    full = os.path.join(os.fsencode(src), NAME)  # the log's full path, its bytes
    expected_id = str(uuid.UUID(bytes=hashlib.sha1(NAMESPACE.bytes + full).digest()[:16], version=5))
    assert {f["session_id"] for f in odd if "session_id" in f} == {expected_id} and session_id(os.fsdecode(full)) == expected_id
    assert [{**f, "session_id": None} if "session_id" in f else f for f in odd] == [{**f, "session_id": None} if "session_id" in f else f for f in plain]
    assert session_id("plain.ndjson") == str(uuid.uuid5(NAMESPACE, "plain.ndjson"))  # UTF-8 names: as before

    rows = ds.dataset(str(table), partitioning="hive").to_table().to_pylist()
    assert sorted({r["source"] for r in rows}) == [shown, f"{src}/plain.ndjson"]
    again = run("--out-dir", str(out), "--results-table", str(table), str(src), timeout=120)
    assert again.returncode == 0 and b"0 translated, 2 skipped (up to date)" in again.stderr, again.stderr


def test_a_failing_file_whose_name_is_not_utf8_is_named_with_escapes(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", src / "ok.ndjson")
    with open(os.path.join(os.fsencode(src), NAME.replace(b".ndjson", b".ndjson.gz")), "wb") as f:
        f.write(b"\x1f\x8b\x08\x00 cut short")
    proc = run("--out-dir", str(tmp_path / "out"), str(src), timeout=120)
    assert proc.returncode == 65, proc.stderr
    failed = proc.stderr.decode().splitlines()[1]
    assert failed.startswith("translator: failed: caf\\xe9 \\xff.ndjson.gz: broken gzip"), failed
