"""Hostile input end to end: numbers at the edge of their type, a failure nothing foresaw, a
stderr that is closed, a reject file on a full disk. Never a traceback, never a lost result."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from support_fixtures import FIXTURES, events, frames_of, lines_of
from support_processes import TRANSLATOR, run

from translator.cli.command import exit_status
from translator.core.rates import Rate, RateCard
from translator.core.translator import Options, Translator
from translator.encoders.enriched import EnrichedEncoder
from translator.model import TurnStart
from translator.shell import modes
from translator.shell.modes import translate
from translator.shell.sink import Config

U64_MAX = (1 << 64) - 1
Event = dict[str, Any]


def raw_run(stamped: bool) -> list[Event]:
    evs = [orjson.loads(ln) for ln in lines_of("tool_use_two_turns")]
    if stamped:
        for i, ev in enumerate(evs):
            ev["ts"] = 1_760_000_000 + i
    return evs


def headless_run() -> list[Event]:
    return [orjson.loads(ln) for ln in (FIXTURES / "headless" / "tool_use_two_turns.jsonl").read_bytes().splitlines()]


def poison(evs: list[Event], etype: str, change: Callable[[Event], None]) -> int:
    """Change the first event of `etype`; its index."""
    i = next(i for i, ev in enumerate(evs) if ev["type"] == etype)
    change(evs[i])
    return i


def second_tool_result(evs: list[Event]) -> int:
    """A second tool_result with an absurd t_ms: two of them overflowed the API time."""
    i = poison(evs, "tool_result", lambda ev: ev.update(t_ms=1.7e308))
    evs.insert(i + 1, dict(evs[i]))
    return i


# name -> (dialect, stamped, what to do to one event; returns the poisoned index/indices)
CASES: dict[str, tuple[Callable[[], list[Event]], Callable[[list[Event]], int]]] = {
    "token count u64 max": (
        lambda: raw_run(False),
        lambda evs: poison(evs, "TurnEnd", lambda ev: ev["usage"].update(input_tokens=U64_MAX)),
    ),
    "token count over u32": (
        lambda: raw_run(False),
        lambda evs: poison(evs, "RunEnd", lambda ev: ev["total_usage"].update(output_tokens=1 << 32)),
    ),
    "ttft.secs u64 max": (
        lambda: raw_run(False),
        lambda evs: poison(evs, "TurnEnd", lambda ev: ev.update(ttft={"secs": U64_MAX, "nanos": 0})),
    ),
    "StreamIdle secs u64 max": (
        lambda: raw_run(False),
        lambda evs: poison(evs, "RunEnd", lambda ev: ev.update(stopped_for={"StreamIdle": {"secs": U64_MAX, "nanos": 0}})),
    ),
    "recorded ts 1e306 on a delta": (
        lambda: raw_run(True),
        lambda evs: poison(evs, "AssistantTextDelta", lambda ev: ev.update(ts=1e306)),
    ),
    "recorded ts 1e20 on the RunEnd": (
        lambda: raw_run(True),
        lambda evs: poison(evs, "RunEnd", lambda ev: ev.update(ts=1e20)),
    ),
    "ISO timestamp past year 9999": (
        lambda: raw_run(True),
        lambda evs: poison(evs, "ToolCallStart", lambda ev: ev.update(ts=None, timestamp="9999-12-31T23:59:59-14:00")),
    ),
    "headless t_ms 1.7e308": (headless_run, second_tool_result),
    "headless token total u64 max": (
        headless_run,
        lambda evs: poison(evs, "result", lambda ev: ev.update(total_input_tokens=U64_MAX)),
    ),
}


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_out_of_range_number_is_a_bad_line_and_every_run_gets_its_result(tmp_path: Path, case: str, fmt: str) -> None:
    make, spoil = CASES[case]
    evs = make()
    bad = spoil(evs)
    poisoned = orjson.dumps(evs[bad]) + b"\n"
    clean = b"".join(orjson.dumps(ev) + b"\n" for ev in make())
    source = tmp_path / "in.ndjson"
    source.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in evs) + clean)
    rejects = tmp_path / "rejects.ndjson"
    proc = run("--format", fmt, "--results-only", "--reject-file", str(rejects), str(source))
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    results = frames_of(proc.stdout)
    assert len(results) == 2 and all(r["type"] == "result" for r in results)
    assert results[1]["subtype"] == "success"  # the run after the bad line is untouched
    assert f"{source}:{bad + 1}:" in stderr
    assert "out of range" in stderr or "0 to " in stderr
    assert rejects.read_bytes() == poisoned * (2 if case == "headless t_ms 1.7e308" else 1)


class PoisonedRates(RateCard):
    """A rate card that fails for one model: a failure nothing in the fold foresaw."""

    def rate(self, model: str) -> Rate | None:
        if model == "poison":
            raise RuntimeError("the rate card broke")
        return super().rate(model)


class FailingEncoder(EnrichedEncoder):
    """An encoder that cannot write the result of a run whose answer says so."""

    def result(self, run: Any, t: float) -> None:
        if run.answer == "poison" or (run.error and "internal error" in run.error):
            raise RuntimeError("the encoder broke")
        super().result(run, t)


def two_runs(first_model: str = "claude-sonnet-4-5") -> bytes:
    first = events("tool_use_two_turns").replace(b'"model":"claude-sonnet-4-5"', f'"model":"{first_model}"'.encode())
    return first + events("thinking")


def test_last_resort_closes_the_run_with_an_error_and_the_stream_goes_on() -> None:
    rates = PoisonedRates.bundled()
    core = Translator(EnrichedEncoder([], session_id="S"), rates=rates, options=Options(clock="estimated"), source="in")
    data = two_runs("poison")
    core.feed(data[:700], 0.0)  # the poisoned TurnEnd arrives split over two chunks
    core.feed(data[700:], 1.0)
    core.end(2.0)
    results = [f for f in frames_of(core.take_output()) if f["type"] == "result"]
    diags = core.take_diagnostics()
    assert [r["subtype"] for r in results] == ["error", "success"]
    assert results[0]["error"] == "internal error at line 9: RuntimeError"
    assert results[1]["result"] == "17 * 23 = 391."
    # the second turn of the failed run fails the same way: reported, but no second result
    assert diags == [
        f"translator: in:{n}: cannot be translated (internal error, RuntimeError: the rate card broke): "
        f"{lines_of('tool_use_two_turns')[n - 1][:80].decode()}"
        for n in (9, 13)
    ]
    assert core.take_rejects() == b"".join(lines_of("tool_use_two_turns")[n - 1] + b"\n" for n in (9, 13))


def test_a_failed_run_cut_off_is_not_said_again() -> None:
    # Its result and its reports are out; its rest is read into nothing, so the input ending
    # inside it is no recovery to report.
    core = Translator(EnrichedEncoder([], session_id="S"), rates=PoisonedRates.bundled(),
                      options=Options(clock="estimated"), source="in")
    core.feed(b"".join(two_runs("poison").splitlines(keepends=True)[:12]), 0.0)  # its second turn under way
    core.end(1.0)
    results = [f for f in frames_of(core.take_output()) if f["type"] == "result"]
    assert [r["error"] for r in results] == ["internal error at line 9: RuntimeError"]
    assert [d.split(": ")[1] for d in core.take_diagnostics()] == ["in:9"]


def test_last_resort_writes_the_plainest_result_when_the_encoder_cannot() -> None:
    rates = PoisonedRates.bundled()
    core = Translator(FailingEncoder([], session_id="S"), rates=rates, options=Options(clock="estimated"), source="in")
    core.feed(two_runs("poison"), 0.0)
    core.end(1.0)
    results = [f for f in frames_of(core.take_output()) if f["type"] == "result"]
    assert results[0] == {
        "type": "result", "subtype": "error", "is_error": True,
        "error": "internal error at line 9: RuntimeError", "session_id": "S",
    }
    assert results[1]["subtype"] == "success"
    assert core.runs_closed == 2


def test_end_and_cancel_are_guarded_too() -> None:
    for stop in ("end", "cancel"):
        core = Translator(FailingEncoder([], session_id="S"), rates=RateCard.bundled(), options=Options(clock="estimated"))
        core.feed(lines_of("tool_use_two_turns")[0] + b"\n", 0.0)
        core.fold.runs.encoder.result = None  # type: ignore[method-assign]  # the encoder dies before the run ends
        getattr(core, stop)(1.0)
        (result,) = frames_of(core.take_output())[-1:]
        assert result["type"] == "result" and result["subtype"] == "error"
        assert core.stopped and not core.run_open


def test_closed_stderr_is_not_worth_dying_for(tmp_path: Path) -> None:
    data = b"not json\n" + events("tool_use_two_turns")
    for redirect in ("2>&-", "2>/dev/full"):
        proc = subprocess.run(
            f"'{TRANSLATOR}' --results-only {redirect}", shell=True, input=data, capture_output=True, timeout=30
        )
        assert proc.returncode == 0, redirect
        assert frames_of(proc.stdout)[0]["result"] == "There are 3 files."


def test_a_reject_file_on_a_full_disk_exits_74_after_every_result(tmp_path: Path) -> None:
    data = b"not json\n" + events("tool_use_two_turns") + b"oops\n" + events("thinking")
    proc = run("--results-only", "--reject-file", "/dev/full", stdin=data)
    assert proc.returncode == 74
    assert [r["subtype"] for r in frames_of(proc.stdout)] == ["success", "success"]
    messages = proc.stderr.decode().splitlines()
    assert sorted(m.split(": ")[1] for m in messages) == ["--reject-file /dev/full", "<stdin>:1", "<stdin>:16"]
    assert "translator: --reject-file /dev/full: No space left on device; rejected lines are no longer kept" in messages


class NotBytes(EnrichedEncoder):
    """An encoder that puts a str among its frames for a run of model "poison": the failure
    comes in the shell's writing, outside the core's own guard."""

    def turn_start(self, ev: TurnStart, t: float) -> None:
        super().turn_start(ev, t)
        if ev.model == "poison":
            self.out.append("not bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("shell", ["direct", "anyio"])  # files and stdin; with --metrics
def test_a_failure_outside_the_core_ends_that_input_and_the_next_is_read(shell: str, tmp_path: Path, capfd: Any) -> None:
    poisoned, good = tmp_path / "poisoned.ndjson", tmp_path / "good.ndjson"
    poisoned.write_bytes(two_runs("poison"))
    good.write_bytes(events("thinking"))
    out = tmp_path / "out"
    cfg = Config(
        sources=[str(poisoned), str(good)], make_encoder=lambda sid: NotBytes([], session_id=sid),
        rates=RateCard.bundled(), session_id="S",
    )
    with open(out, "wb") as sink:
        outcome = modes.run(cfg, sink.fileno()) if shell == "direct" else anyio.run(translate, cfg, sink.fileno())
    assert outcome.internal_error and exit_status(outcome, False) == 70
    results = [f for f in frames_of(out.read_bytes()) if f["type"] == "result"]
    assert results[-1]["result"] == "17 * 23 = 391."  # the next input, whole
    err = capfd.readouterr().err
    assert f"translator: {poisoned}:" in err and "internal error (TypeError: " in err and "this input ends here" in err


async def test_a_failure_outside_the_core_ends_only_the_followed_stream(tmp_path: Path, capfd: Any) -> None:
    log, out = tmp_path / "stdout.ndjson", tmp_path / "out"
    log.write_bytes(two_runs("poison"))
    cfg = Config(
        sources=[], make_encoder=lambda sid: NotBytes([], session_id=sid), rates=RateCard.bundled(),
        session_id="S", follow=str(log),
    )
    with open(out, "wb") as sink:
        async with anyio.create_task_group() as tg:
            tg.start_soon(translate, cfg, sink.fileno())
            with anyio.fail_after(20):
                while b"this input ends here" not in capfd.readouterr().err.encode():
                    await anyio.sleep(0.05)
            with open(log, "ab") as f:
                f.write(events("thinking"))  # the follower goes on, with a new stream
            with anyio.fail_after(20):
                while b"17 * 23 = 391." not in out.read_bytes():
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize("dialect", ["raw", "headless"])
def test_a_line_nested_too_deeply_is_a_bad_line_not_a_lost_chunk(tmp_path: Path, dialect: str, fmt: str) -> None:
    """msgspec gives up past ~1000 levels with a RecursionError (orjson at 1024, with an error):
    the line is a bad line with its number, never an internal error, and the lines read with it
    in one batch are not lost."""
    deep = b"[" * 5000 + b"]" * 5000
    if dialect == "raw":
        evs = raw_run(False)
        bad = b'{"type":"TurnStart","turn_index":0,"message_id":"m","model":"x","zz":' + deep + b"}"
    else:
        evs = headless_run()
        bad = b'{"type":"warning","subtype":"x","details":' + deep + b"}"
    lines = [orjson.dumps(ev) for ev in evs]
    lines.insert(2, bad)
    source = tmp_path / "in.ndjson"
    source.write_bytes(b"".join(ln + b"\n" for ln in lines) * 2)
    rejects = tmp_path / "rejects.ndjson"
    proc = run("--format", fmt, "--results-only", "--reject-file", str(rejects), str(source))
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert "internal error" not in stderr
    for no in (3, len(lines) + 3):
        assert f"{source}:{no}: invalid JSON (nested too deeply)" in stderr
    results = frames_of(proc.stdout)
    assert [r["subtype"] for r in results] == ["success", "success"]
    assert rejects.read_bytes() == (bad + b"\n") * 2


def test_under_clock_auto_the_first_events_iso_stamp_is_checked_before_it_decides(tmp_path: Path) -> None:
    """`--clock auto` reads the first event's stamp to decide: one out of range is a bad line
    (as docs/guarantees.md says) and the next event decides, not a silent fall back to the estimate."""
    evs = raw_run(False)
    for i, ev in enumerate(evs):
        ev["timestamp"] = f"2026-01-01T00:00:{i:02}Z"
    evs[0]["timestamp"] = "9999-12-31T23:59:59-14:00"
    source = tmp_path / "in.ndjson"
    source.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in evs))
    proc = run("--clock", "auto", "--results-only", str(source))
    assert f"{source}:1: 'timestamp' is out of range (1970 to 9999)" in proc.stderr.decode()
    (result,) = frames_of(proc.stdout)
    assert result["duration_source"] == "recorded"
    assert result["duration_ms"] == (len(evs) - 2) * 1000


HUGE_NUMBER_IN_A_RESULT = {
    "raw": [b'{"type":"TurnStart","turn_index":0,"message_id":"m","model":"mock"}',
            b'{"type":"ToolCallStart","turn_index":0,"tool_use_id":"t1","name":"Glob"}',
            b'{"type":"ToolCallEnd","turn_index":0,"tool_use_id":"t1","is_error":false,'
            b'"content":[{"type":"text","text":"x","n":1e400}]}',
            b'{"type":"RunEnd","final_messages":[],"total_usage":{"input_tokens":0,"output_tokens":0},'
            b'"turn_count":1,"stopped_for":"EndOfTurn"}'],
    "headless": [b'{"type":"system","subtype":"init","session_id":"s","model":"mock/mock"}',
                 b'{"type":"tool_use","id":"t1","name":"Glob","input":{}}',
                 b'{"type":"tool_result","tool_use_id":"t1","is_error":false,"content":[{"type":"text","text":"x","n":1e400}]}',
                 b'{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Glob","input":{}}]}',
                 b'{"type":"result","subtype":"success","result":"","session_id":"s","turns":1}'],
}


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
@pytest.mark.parametrize("dialect", sorted(HUGE_NUMBER_IN_A_RESULT))
def test_a_number_no_double_holds_inside_a_tool_result_is_written_not_a_failure(dialect: str, fmt: str) -> None:
    """JSON allows `1e400`; the reader keeps a tool's result as the checked bytes it came as. The
    default format writes them as they came; claude-code, which must build the blocks, reads the
    number as infinity. Either way the run ends as it should."""
    proc = run("--format", fmt, "--clock", "estimated", stdin=b"\n".join(HUGE_NUMBER_IN_A_RESULT[dialect]) + b"\n")
    assert proc.returncode == 0 and proc.stderr in (b"", b"translator: warning: no rate for model 'mock'; its cost counts as 0\n"), proc.stderr
    frames = [json.loads(line) for line in proc.stdout.splitlines()]  # (the stdlib reads 1e400)
    assert frames[-1]["type"] == "result" and frames[-1]["subtype"] == "success"
    if fmt == "claude-code":
        (user,) = [f for f in frames if f["type"] == "user"]
        assert user["message"]["content"][0]["content"] == "x"  # a text-only result is its text
    else:
        assert b'"n":1e400' in proc.stdout  # the tool result's bytes, as they came
