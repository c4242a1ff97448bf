"""--log-format json: diagnostics as JSON lines a log shipper can parse, from the installed command."""

from __future__ import annotations

import calendar
import pickle
import time
from pathlib import Path

import orjson
from support_fixtures import events, recoveries
from support_processes import run

from translator.core.states import CUT, RETRIED
from translator.diagnostics import KINDS, Diagnostic, Notice

BAD = (
    b"not json\n"  # invalid_json
    b"\xff\xfe\n"  # invalid_utf8
    b"[1, 2]\n"  # not_an_event
    b'{"type":"TurnStart","turn_index":"zero"}\n'  # malformed_event
    + b'{"type":"AssistantTextDelta","text":"' + b"s" * 1100 + b'"}\n'  # too_long under --max-line-bytes 1000
)


def test_json_diagnostics_carry_the_fields_and_at_most_80_bytes_of_the_line() -> None:
    before = time.time()
    proc = run("--log-format", "json", "--max-line-bytes", "1000", stdin=BAD + events("thinking"))
    assert proc.returncode == 0
    assert orjson.loads(proc.stdout.splitlines()[-1])["result"] == "17 * 23 = 391."
    records = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert [(r["line"], r["kind"]) for r in records] == [
        (1, "invalid_json"), (2, "invalid_utf8"), (3, "not_an_event"), (4, "malformed_event"), (5, "too_long"),
    ]
    for r in records:
        assert set(r) == {"time", "level", "source", "line", "reason", "kind", "excerpt"}
        assert r["level"] == "warning" and r["source"] == "<stdin>"
        assert r["time"].endswith("Z")
        stamp = calendar.timegm(time.strptime(r["time"][:19], "%Y-%m-%dT%H:%M:%S"))
        assert before - 1 <= stamp <= time.time() + 1
    assert records[0]["excerpt"] == "not json" and records[0]["reason"].startswith("invalid JSON")
    assert records[4]["reason"] == "line longer than 1000 bytes (1139 bytes)"
    assert records[4]["excerpt"] == '{"type":"AssistantTextDelta","text":"' + "s" * 43  # 80 bytes, no more


def test_recoveries_are_json_with_their_own_level_kind_and_message() -> None:
    data, said = recoveries()
    proc = run("--log-format", "json", stdin=data)
    assert proc.returncode == 0
    records = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert [(r["line"], r["kind"]) for r in records] == said
    assert [(r["level"], r["message"]) for r in records] == [("info", RETRIED.says), ("warning", CUT.says)]
    for r in records:  # no excerpt: a recovery quotes nothing of the input
        assert set(r) == {"time", "level", "source", "line", "kind", "message"} and r["source"] == "<stdin>"


def test_text_stays_the_default_with_the_same_report() -> None:
    proc = run(stdin=BAD[:9])
    assert proc.stderr.decode().startswith("translator: <stdin>:1: invalid JSON (")
    assert proc.stderr.decode().endswith("): not json\n")


def test_other_messages_are_json_too() -> None:
    proc = run("--log-format", "json", "/nonexistent/events.ndjson")
    assert proc.returncode == 66
    (record,) = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert record["level"] == "error"
    assert record["message"] == "/nonexistent/events.ndjson: No such file or directory"


def test_a_diagnostic_is_its_text_line_and_survives_a_trip_to_a_batch_worker() -> None:
    diag = Diagnostic("a.ndjson", 7, "invalid UTF-8", "\\xff")
    assert diag == "translator: a.ndjson:7: invalid UTF-8: \\xff"
    back = pickle.loads(pickle.dumps(diag))
    assert (back, back.line, back.kind) == (diag, 7, "invalid_utf8")
    assert diag.kind in KINDS
    notice = Notice("a.ndjson", 9, CUT.kind, CUT.says, CUT.level)
    assert notice == f"translator: a.ndjson:9: warning: {CUT.says}"
    back = pickle.loads(pickle.dumps(notice))
    assert (back, back.line, back.kind, back.level) == (notice, 9, "truncated", "warning")


def test_batch_reports_and_summary_are_json_too(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.ndjson").write_bytes(b"not json\n" + events("thinking"))
    proc = run("--log-format", "json", "--out-dir", str(tmp_path / "out"), str(tmp_path / "in"))
    assert proc.returncode == 0
    report, summary = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert (report["level"], report["line"], report["kind"]) == ("warning", 1, "invalid_json")
    assert report["source"].endswith("a.ndjson")
    assert summary["level"] == "info" and summary["message"].startswith("1 translated, 0 skipped")
