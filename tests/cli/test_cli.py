"""The installed command end to end, through real pipes, files and signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support_fixtures import EXPECTED, FIXTURES, events, frames_of, lines_of, recoveries
from support_processes import TRANSLATOR, Live, fixture, run

from translator.core.states import CUT, RETRIED


def test_file_replay_matches_golden_output() -> None:
    proc = run("--session-id", "SESSION", fixture("tool_use_two_turns"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (EXPECTED / "tool_use_two_turns.enriched.jsonl").read_bytes()
    assert proc.stderr == b""


def test_python_dash_m_and_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "translator", "--version"], capture_output=True)
    assert proc.returncode == 0 and proc.stdout.startswith(b"translator 0.")


def test_help_shows_examples() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for use in (b"live, in a pipe", b"replay saved logs", b"sidecar", b"--exit-status"):
        assert use in proc.stdout


def test_the_help_names_what_the_readme_gives_a_new_user() -> None:
    """The headless input, the claude-code output, `translator report`, `--rates genai-prices`,
    and 73 for an --output or --reject-file that cannot be created (docs/usage.md: Exit statuses)."""
    proc = run("--help")
    text = " ".join(proc.stdout.decode().split())
    assert proc.returncode == 0
    assert "or its headless stream-json" in text and "(--format claude-code)" in text
    assert "translator --results-table results/ logs/ && translator report results/" in text
    assert "genai-prices: that package's prices" in text
    assert "73 --output, --reject-file or --out-dir cannot be created" in text
    assert run("-o", "/nonexistent/x.jsonl", fixture("thinking")).returncode == 73


def test_usage_error_is_64() -> None:
    proc = run("--clock", "sundial")
    assert proc.returncode == 64 and b"translator:" in proc.stderr and proc.stdout == b""


def test_stdin_pipe_uses_the_wall_clock_and_a_fresh_session() -> None:
    proc = run(stdin=events("tool_use_two_turns"))
    frames = frames_of(proc.stdout)
    assert frames[-1]["duration_source"] == "wall"
    assert frames[0]["session_id"] == frames[-1]["session_id"] != "SESSION"
    assert frames[-1]["result"] == "There are 3 files."


def test_each_file_is_its_own_stream() -> None:
    proc = run(fixture("thinking"), "-", fixture("max_turns"), stdin=events("multi_input_frames"))
    frames = frames_of(proc.stdout)
    inits = [f for f in frames if f["type"] == "system"]
    results = [f for f in frames if f["type"] == "result"]
    assert len(inits) == 3 and len({f["session_id"] for f in inits}) == 3
    assert [r["subtype"] for r in results] == ["success", "success", "success", "max_turns"]
    assert [r["duration_source"] for r in results] == ["estimated", "wall", "wall", "estimated"]


@pytest.mark.parametrize(
    ("name", "status"), [("tool_use_two_turns", 0), ("max_turns", 75), ("api_error", 1)]
)
def test_exit_status_follows_the_agent(name: str, status: int) -> None:
    assert run("--exit-status", fixture(name)).returncode == status
    assert run(fixture(name)).returncode == 0


def test_exit_status_for_a_cut_stream_and_for_no_input() -> None:
    cut = b"\n".join(lines_of("tool_use_two_turns")[:5]) + b"\n"
    assert run("--exit-status", stdin=cut).returncode == 1
    empty = run("--exit-status", stdin=b"")
    assert (empty.returncode, empty.stdout, empty.stderr) == (
        66, b"", b"translator: --exit-status: the input held no run\n")


def test_missing_file_is_reported_and_the_rest_is_translated(tmp_path: Path) -> None:
    proc = run(str(tmp_path / "nope.jsonl"), fixture("thinking"))
    assert proc.returncode == 66
    assert b"nope.jsonl: No such file or directory" in proc.stderr
    assert frames_of(proc.stdout)[-1]["result"] == "17 * 23 = 391."


def test_bad_rate_card_is_a_configuration_error(tmp_path: Path) -> None:
    card = tmp_path / "rates.json"
    card.write_text('{"rates": [{"model": "x"}]}')
    proc = run("--rates", str(card), fixture("thinking"))
    assert proc.returncode == 78 and b"needs 'model', 'input' and 'output'" in proc.stderr


def test_reject_file_gets_every_bad_line_verbatim(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.ndjson"
    rejects.write_bytes(b"earlier\n")
    bad = [b"oops", b'{"type":"TurnEnd"}', b"\xc3\x28"]
    data = b"\n".join(lines_of("thinking")[:3] + bad + lines_of("thinking")[3:]) + b"\n"
    proc = run("--reject-file", str(rejects), stdin=data)
    assert proc.returncode == 0
    assert rejects.read_bytes() == b"earlier\n" + b"".join(b + b"\n" for b in bad)
    messages = proc.stderr.decode().splitlines()
    assert [m.split(":")[2] for m in messages] == ["4", "5", "6"]
    assert messages[0].startswith("translator: <stdin>:4: invalid JSON")
    assert frames_of(proc.stdout)[-1]["result"] == "17 * 23 = 391."


def test_on_invalid_fail_exits_65_after_closing_the_frame() -> None:
    data = b"\n".join([*lines_of("tool_use_two_turns")[:4], b"oops", *lines_of("tool_use_two_turns")[4:]])
    proc = run("--on-invalid", "fail", stdin=data)
    assert proc.returncode == 65
    result = frames_of(proc.stdout)[-1]
    assert result["type"] == "result" and result["subtype"] == "error"
    assert result["error"].startswith("input rejected at line 5")


def test_a_recovery_is_said_on_stderr_but_is_no_bad_line(tmp_path: Path) -> None:
    # A retried turn and a run cut off: each said where it happened, with its own level; nothing
    # is rejected, --on-invalid fail does not stop, and the exit status stays 0.
    data, ((retry, _), (cut, _)) = recoveries()
    rejects = tmp_path / "rejects.ndjson"
    proc = run("--on-invalid", "fail", "--reject-file", str(rejects), stdin=data)
    assert proc.returncode == 0
    assert proc.stderr.decode().splitlines() == [
        f"translator: <stdin>:{retry}: info: {RETRIED.says}",
        f"translator: <stdin>:{cut}: warning: {CUT.says}",
    ]
    results = [f for f in frames_of(proc.stdout) if f["type"] == "result"]
    assert [(r["subtype"], r.get("error")) for r in results] == [("success", None), ("error", CUT.closes)]
    assert results[0]["result"] == "Here is the full answer."
    assert rejects.read_bytes() == b""


def test_frames_are_flushed_while_the_input_stays_open() -> None:
    live = Live()
    lines = lines_of("tool_use_two_turns")
    live.send(b"\n".join(lines[:8]) + b"\n")  # up to the first ToolCallEnd
    init, tool_use, tool_result = live.read_frames(3)
    assert init["subtype"] == "init" and tool_use["name"] == "Bash" and tool_result["type"] == "tool_result"
    live.send(lines[8] + b"\n")
    assert live.read_frames(1)[0]["type"] == "message"
    time.sleep(0.25)
    live.send(b"\n".join(lines[9:]) + b"\n")
    *_, result = live.read_frames(2)
    assert result["type"] == "result" and result["duration_ms"] >= 250
    assert result["duration_source"] == "wall"
    assert live.proc.stdin is not None
    live.proc.stdin.close()
    assert live.proc.wait(timeout=10) == 0


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_closes_the_open_frame_as_cancelled(signum: int, status: int) -> None:
    live = Live("--exit-status")
    live.send(b"\n".join(lines_of("tool_use_two_turns")[:8]) + b"\n")
    live.read_frames(3)
    live.proc.send_signal(signum)
    code, rest, err = live.finish()
    assert code == status
    (result,) = frames_of(rest)
    assert result["subtype"] == "cancelled" and result["is_error"] is True
    assert result["tool_calls_seen"] == 1
    assert err == b""


def test_signal_between_runs_adds_no_result() -> None:
    live = Live()
    live.send(events("thinking"))
    live.read_frames(3)
    live.proc.send_signal(signal.SIGTERM)
    code, rest, err = live.finish()
    assert (code, rest, err) == (143, b"", b"")


def test_closed_downstream_ends_quietly(tmp_path: Path) -> None:
    big = tmp_path / "big.ndjson"
    big.write_bytes(events("tool_use_two_turns") * 20000)
    reader = subprocess.Popen(["head", "-c", "100"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    proc = subprocess.run([TRANSLATOR, str(big)], stdout=reader.stdin, stderr=subprocess.PIPE, timeout=60)
    assert reader.stdin is not None
    reader.stdin.close()
    reader.wait()
    assert proc.returncode == 0
    assert proc.stderr == b""


def test_claude_code_format_through_a_pipe() -> None:
    proc = run("--format", "claude-code", "--exit-status", stdin=events("max_turns"))
    assert proc.returncode == 1 and proc.stderr == b""
    frames = frames_of(proc.stdout)
    assert [f["type"] for f in frames] == ["system", "assistant", "assistant", "user", "result"]
    result = frames[-1]
    assert (result["subtype"], result["errors"]) == ("error_max_turns", ["Reached maximum number of turns (1)"])
    assert result["session_id"] == frames[0]["session_id"]


def test_claude_code_results_only_is_one_json_object_per_run() -> None:
    proc = run("--format", "claude-code", "--results-only", fixture("multi_input_frames"))
    first, second = frames_of(proc.stdout)
    assert (first["result"], second["result"]) == ("Hello! How can I help?", "2 + 2 = 4.")
    assert "model_usage_since_last_result" not in second


def test_headless_stream_json_is_detected_and_repaired() -> None:
    old = (FIXTURES / "headless" / "tool_use_two_turns.pre0049.jsonl").read_bytes()
    proc = run(stdin=old)
    assert proc.returncode == 0 and proc.stderr == b""
    result = frames_of(proc.stdout)[-1]
    assert (result["result"], result["num_turns"], result["duration_source"]) == ("There are 3 files.", 2, "wall")
    assert proc.stdout.splitlines()[:-1] == old.splitlines()[:-1]


def test_strict_rejects_a_field_serde_does_not_write_and_trust_input_is_still_accepted(tmp_path: Path) -> None:
    source = tmp_path / "in.ndjson"
    data = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes()
    source.write_bytes(data.replace(b'{"type":"TurnStart",', b'{"type":"TurnStart","note":1,', 1))
    plain = run("--clock", "estimated", "--session-id", "S", str(source))
    assert plain.returncode == 0 and plain.stderr == b""
    assert run("--clock", "estimated", "--session-id", "S", "--trust-input", str(source)).stdout == plain.stdout
    strict = run("--clock", "estimated", "--session-id", "S", "--strict", str(source))
    assert b":1: TurnStart has an unknown field 'note'" in strict.stderr
    assert strict.stdout != plain.stdout and strict.returncode == 0



def test_a_terminal_on_stdin_is_said_and_quiet_says_only_errors(tmp_path: Path) -> None:
    """A bare `translator` on a terminal would wait unsaid: it says what it reads and how to
    end it (stdin from a pty, ended with Ctrl-D). `--quiet` says only errors: not that, nor a bad
    line's report, nor a batch's summary; a file that cannot be read still is one line."""
    import os
    import pty

    def on_a_terminal(*args: str) -> tuple[int, bytes, bytes]:
        main, side = pty.openpty()
        proc = subprocess.Popen([TRANSLATOR, *args], stdin=side, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(side)
        time.sleep(0.5)
        os.write(main, b"\x04")  # Ctrl-D: the end of the input
        out, err = proc.communicate(timeout=30)
        os.close(main)
        return proc.returncode, out, err

    assert on_a_terminal() == (0, b"", b"translator: reading the agent's events from the terminal; end with Ctrl-D, "
                                        b"or pipe a log in (translator < events.ndjson) or name files\n")
    assert on_a_terminal("--quiet") == (0, b"", b"")
    bad = b"not json\n" + Path(fixture("thinking")).read_bytes()
    loud, quiet = run(stdin=bad), run("-q", stdin=bad)
    assert loud.stderr.startswith(b"translator: <stdin>:1: ") and quiet.stderr == b""
    assert quiet.returncode == loud.returncode == 0 and quiet.stdout.count(b"\n") == loud.stdout.count(b"\n") == 3
    missing = run("-q", "/nonexistent.jsonl")
    assert (missing.returncode, missing.stderr) == (66, b"translator: /nonexistent.jsonl: No such file or directory\n")
    batch = run("--quiet", "--out-dir", str(tmp_path / "out"), fixture("thinking"))
    assert (batch.returncode, batch.stderr) == (0, b"") and run("--out-dir", str(tmp_path / "o2"), fixture("thinking")).stderr
