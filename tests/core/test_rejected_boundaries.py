"""Boundaries that cost more than their own line, through the installed command: a rejected
RunEnd still closes its run; the envelope's `v` is the integer 1 and a bad entry of a poll
response is one bad event; Claude Code's own output given as input is said once and skipped."""

from __future__ import annotations

import orjson
import pytest
from support_fixtures import FIXTURES, events, frames_of, results, run_end, turn
from support_processes import Live, run

from translator.core.stops import LOST_RUN_END

ONE = turn(0, "first") + run_end(turns=1)
TWO = turn(0, "second") + run_end(turns=1)
RECOVERY = "the open run's RunEnd is missing"
AT = turn(0, "first").count(b"\n") + 1  # the first run's RunEnd's line


def translated(data: bytes, *args: str) -> tuple[int, list[dict], list[str]]:
    proc = run("--session-id", "S", "--clock", "estimated", *args, stdin=data)
    return proc.returncode, frames_of(proc.stdout), proc.stderr.decode().splitlines()


@pytest.mark.parametrize(("field", "value", "said"), [
    ("turn_count", 1 << 32, "RunEnd has a malformed 'turn_count' (a whole number 0 to 4294967295), not 4294967296"),
    ("turns_without_edit", -1, "RunEnd has a malformed 'turns_without_edit' (a whole number 0 to 4294967295), not -1"),
    ("stopped_for", {"MaxTurnsReached": 1 << 40}, "RunEnd has a malformed 'stopped_for' (a variant name, or one "
                                                   "variant with its value; numbers whole numbers 0 to 4294967295)"),
])
def test_a_rejected_run_end_still_closes_its_run(field: str, value: object, said: str) -> None:
    """The next run was read as the same run's (a retried turn, or a lost RunEnd said): one
    run's result was lost or misplaced. Now each run has its own result, the first an error
    that names the bad value."""
    bad = orjson.loads(run_end(turns=1))
    bad[field] = value
    status, frames, err = translated(turn(0, "first") + orjson.dumps(bad) + b"\n" + TWO)
    first, second = results(b"".join(orjson.dumps(f) + b"\n" for f in frames))
    assert status == 0
    assert (first["subtype"], first["is_error"]) == ("error", True)
    assert first["error"] == f"its RunEnd was rejected at line {AT}: {said}"
    assert (second["subtype"], second["result"]) == ("success", "second")
    assert len(err) == 1 and err[0].startswith(f"translator: <stdin>:{AT}: {said}: "), err
    assert not any(RECOVERY in line for line in err)


def test_an_over_long_run_end_still_closes_its_run() -> None:
    """A long session's RunEnd (its whole history) is the line most likely to pass the limit."""
    history = [{"role": "user", "content": [{"type": "text", "text": "x" * 5000}]}]
    long_end = orjson.loads(run_end(turns=1))
    long_end["final_messages"] = history
    data = turn(0, "first") + orjson.dumps(long_end) + b"\n" + TWO
    status, frames, err = translated(data, "--max-line-bytes", "4096")
    assert status == 0
    first, second = [f for f in frames if f["type"] == "result"]
    assert first["subtype"] == "error" and first["error"].startswith(f"its RunEnd was rejected at line {AT}: line longer "
                                                                       "than 4096 bytes")
    assert second["result"] == "second" and len(err) == 1


def test_a_run_end_that_is_no_json_for_a_bad_value_still_closes_its_run() -> None:
    """A number no double holds (JSON allows one), or invalid UTF-8: the line is no JSON, its
    run known by how it begins. One cut short is its writer's end, not a rejected RunEnd: the
    next run's start closes its run as before, said."""
    bad = run_end(turns=1).replace(b'"turn_count":1', b'"turn_count":1e400')
    status, frames, err = translated(turn(0, "first") + bad + TWO)
    first, second = [f for f in frames if f["type"] == "result"]
    assert status == 0 and len(err) == 1
    assert first["error"] == (f"its RunEnd was rejected at line {AT}: invalid JSON (number is infinity when parsed "
                              "as double: line 1 column 102 (char 101))")
    assert second["result"] == "second"
    status, frames, err = translated(turn(0, "first") + run_end(turns=1)[:40] + b"\n" + TWO)
    first, second = [f for f in frames if f["type"] == "result"]
    assert (first["error"], second["result"]) == (LOST_RUN_END, "second")
    assert len(err) == 2 and RECOVERY in err[1]


@pytest.mark.parametrize(("v", "said"), [("true", "true"), ("1.0", "1.0"), ("1e0", "1.0"), ('"1"', '"1"'),
                                         ("2", "2"), ("null", "null")])
def test_the_envelope_version_is_the_integer_1(v: str, said: str) -> None:
    """`true`, `1.0` and `1e0` were taken for 1 (they compare equal in Python)."""
    line = b'{"event":' + turn(0, "hi").splitlines()[0] + b',"v":' + v.encode() + b"}\n"
    status, frames, err = translated(line + ONE)
    assert status == 0 and len(err) == 1
    assert err[0].startswith(f"translator: <stdin>:1: envelope version {said} is not supported (the integer 1): "), err
    assert [f["result"] for f in frames if f["type"] == "result"] == ["first"]


def test_a_bad_entry_of_a_poll_response_is_one_bad_event(tmp_path: object) -> None:
    """One v:2 entry rejected the whole line, and its good events with it."""
    items = [{"event": orjson.loads(ln), "v": 1} for ln in (turn(0, "polled") + run_end(turns=1)).splitlines()]
    items.insert(1, {"event": {"type": "TurnStart", "turn_index": 7}, "v": 2})
    poll = orjson.dumps({"events": items, "next_cursor": 4, "status": "done"}) + b"\n"
    status, frames, err = translated(poll)
    assert status == 0
    assert [f["result"] for f in frames if f["type"] == "result"] == ["polled"]
    assert len(err) == 1 and err[0].startswith("translator: <stdin>:1: envelope version 2 is not supported"), err
    assert '{"event":{"type":"TurnStart","turn_index":7},"v":2}' in err[0]


@pytest.mark.parametrize("name", ["thinking", "tool_use_two_turns", "multi_input_frames"])
def test_claude_codes_own_output_is_said_once_and_skipped(name: str, tmp_path: object) -> None:
    """It was translated silently: its frames passed through as unknown lines, a result for a
    run nobody ran. Every line goes to the reject file, one is said."""
    from pathlib import Path

    captured = (FIXTURES / "claude-code" / f"{name}.stream.jsonl").read_bytes()
    rejects = Path(str(tmp_path)) / "rejects"
    status, frames, err = translated(captured + events("thinking"), "--reject-file", str(rejects))
    assert status == 0
    assert err == [f"translator: <stdin>:1: Claude Code's own output (claude -p stream-json, or --format "
                   f"claude-code), not the agent's events: skipped, this line and the rest of it: "
                   f"{captured[:80].decode()}"]
    assert rejects.read_bytes() == captured  # nothing lost, nothing else rejected
    assert [f["result"] for f in frames if f["type"] == "result"] == ["17 * 23 = 391."]  # the agent's run after it
    own = run("--format", "claude-code", stdin=events("thinking")).stdout  # this command's own claude-code format
    again = run(stdin=own)
    assert (again.returncode, again.stdout, len(again.stderr.splitlines())) == (0, b"", 1)


HEADLESS_RUN = (FIXTURES / "headless" / "tool_use_two_turns.jsonl").read_bytes()
HEADLESS_NEXT = (FIXTURES / "headless" / "multi_input_frames.jsonl").read_bytes()
RESULT_AT = HEADLESS_RUN.count(b"\n")  # the first run's result's line
BAD_RESULTS = [
    (b'"turns":2,', b'"turns":4294967296,',
     "result has a malformed 'turns' (a whole number 0 to 4294967295), not 4294967296"),
    (b'"turns":2,', b'"turns":"two",', "result has a malformed 'turns' (a whole number 0 to 4294967295), not \"two\""),
    (b'"total_cost_usd":0.025906199999999997,', b'"total_cost_usd":-1,',
     "result has a malformed 'total_cost_usd' (a number, not negative), not -1"),
    (b'"subtype":"success"', b'"subtype":7', "result has a malformed 'subtype', not 7"),
    (b'"result":"There', b'"result":"\xff There', "invalid UTF-8"),
    (b'"duration_ms":3,', b'"duration_ms":1e400,', "invalid JSON (number is infinity when parsed as double: "
                                                    "line 1 column 235 (char 234))"),
]


def headless_error(frame: dict, fmt: str) -> str:
    """The error text of a run's result in either format."""
    return frame["error"] if fmt == "enriched" else frame["errors"][0]


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize(("good", "bad", "said"), BAD_RESULTS)
def test_a_rejected_headless_result_still_closes_its_run(fmt: str, good: bytes, bad: bytes, said: str) -> None:
    """As a rejected RunEnd: the run stayed open, the next run's init closed it as a result
    'missing' (said as such), and a live stream had no result until then. Now its error result
    names the bad value and its line, and the next run has its own."""
    assert HEADLESS_RUN.count(good) == 1
    status, frames, err = translated(HEADLESS_RUN.replace(good, bad) + HEADLESS_NEXT, "--format", fmt)
    first, second = [f for f in frames if f["type"] == "result"]
    assert status == 0
    assert first["is_error"] is True and first["subtype"] == ("error" if fmt == "enriched" else "error_during_execution")
    assert headless_error(first, fmt) == f"its result was rejected at line {RESULT_AT}: {said}"
    assert {f["session_id"] for f in frames if "session_id" in f} == {frames[0]["session_id"]}  # its frames' own
    assert (second["is_error"], second["result"]) == (False, "2 + 2 = 4.")
    assert len(err) == 1 and err[0].startswith(f"translator: <stdin>:{RESULT_AT}: {said}: "), err


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_an_over_long_headless_result_still_closes_its_run(fmt: str) -> None:
    data = HEADLESS_RUN.replace(b'"result":"There', b'"result":"' + b"x" * 5000 + b"There") + HEADLESS_NEXT
    status, frames, err = translated(data, "--format", fmt, "--max-line-bytes", "4096")
    first, second = [f for f in frames if f["type"] == "result"]
    assert status == 0 and len(err) == 1
    assert headless_error(first, fmt).startswith(f"its result was rejected at line {RESULT_AT}: line longer than 4096 "
                                                 "bytes")
    assert second["result"] == "2 + 2 = 4."


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_a_rejected_headless_result_is_answered_at_once_live(fmt: str) -> None:
    """A pipe held open: the run's error result comes as its result line does, not when the
    next run begins or the input ends."""
    good, bad, said = BAD_RESULTS[0]
    live = Live("--session-id", "S", "--clock", "estimated", "--format", fmt)
    try:
        live.send(HEADLESS_RUN.replace(good, bad))
        frame: dict = {}
        while frame.get("type") != "result":
            frame = live.read_frames(1)[0]
        assert headless_error(frame, fmt) == f"its result was rejected at line {RESULT_AT}: {said}"
        live.send(HEADLESS_NEXT)
        frame = {}
        while frame.get("type") != "result":
            frame = live.read_frames(1)[0]
        assert frame["result"] == "2 + 2 = 4."
    finally:
        assert live.proc.stdin is not None
        live.proc.stdin.close()
        status, rest, err = live.finish()
    assert status == 0 and rest == b""
    assert err.decode().splitlines() == [f"translator: <stdin>:{RESULT_AT}: {said}: "
                                         f"{HEADLESS_RUN.replace(good, bad).splitlines()[-1][:80].decode()}"]
