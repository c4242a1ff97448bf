"""--follow FILE: the sidecar mode, with a real file growing, truncated and replaced."""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path

from support_fixtures import events, frames_of, lines_of, recoveries
from support_processes import Follower, append, health, poll, port_of

from translator.core.states import CUT, RETRIED


def test_follows_growth_truncation_and_replacement(tmp_path: Path) -> None:
    log = tmp_path / "stdout.ndjson"
    lines = lines_of("tool_use_two_turns")
    log.write_bytes(b"\n".join(lines[:8]) + b"\n")
    follower = Follower(log)
    init, tool_use, _ = follower.read_frames(3)
    assert init["subtype"] == "init" and tool_use["type"] == "tool_use"
    append(log, b"\n".join(lines[8:]) + b"\n")  # the run goes on and ends
    *_, result = follower.read_frames(3)
    assert result["type"] == "result" and result["result"] == "There are 3 files."
    assert result["duration_source"] == "wall"

    log.write_bytes(events("thinking"))  # truncated and rewritten: a new stream
    init2, _, result2 = follower.read_frames(3)
    assert init2["subtype"] == "init" and init2["session_id"] != init["session_id"]
    assert result2["result"] == "17 * 23 = 391."

    fresh = tmp_path / "next.ndjson"  # replaced, as a rotating writer does
    fresh.write_bytes(events("max_turns")[:-1])  # the last line still being written
    os.replace(fresh, log)
    init3, *_ = follower.read_frames(4)
    assert init3["session_id"] not in (init["session_id"], init2["session_id"])
    append(log, b"\n")
    assert follower.read_frames(1)[0]["subtype"] == "max_turns"

    append(log, b"\n".join(lines[:3]) + b"\n")  # a run in flight when we are stopped
    time.sleep(0.5)
    status, rest, err = follower.stop()
    assert status == 143 and err == b""
    assert [f["subtype"] for f in frames_of(rest)] == ["cancelled"]


def test_a_run_cut_off_by_the_file_being_replaced_is_said(tmp_path: Path) -> None:
    log = tmp_path / "stdout.ndjson"
    data, ((retry, _), (cut, _)) = recoveries()
    log.write_bytes(data)  # whole before the follower starts: its first read takes it all
    follower = Follower(log, "--results-only")
    assert follower.read_frames(1)[0]["subtype"] == "success"  # the retried run
    fresh = tmp_path / "next.ndjson"
    fresh.write_bytes(events("thinking"))
    os.replace(fresh, log)  # the agent died mid-run and a new one writes a new file
    closed, new = follower.read_frames(2)
    assert (closed["error"], new["result"]) == (CUT.closes, "17 * 23 = 391.")
    status, rest, err = follower.stop()
    assert (status, rest) == (143, b"")
    assert err.decode().splitlines() == [
        f"translator: {log}:{retry}: info: {RETRIED.says}",
        f"translator: {log}:{cut}: warning: {CUT.says}",
    ]


def test_from_end_and_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.ndjson"
    follower = Follower(log)
    log.write_bytes(events("thinking"))
    assert follower.read_frames(3)[-1]["result"] == "17 * 23 = 391."
    status, rest, _ = follower.stop()
    assert (status, rest) == (143, b"")

    skipping = Follower(log, "--from-end")
    time.sleep(1.0)  # started and at the end of the file
    append(log, events("multi_input_frames"))
    frames = skipping.read_frames(5)
    assert [f.get("result") for f in frames if f["type"] == "result"] == ["Hello! How can I help?", "2 + 2 = 4."]
    skipping.stop()


def numbered_run(i: int) -> bytes:
    """A run whose answer names `i`, a little longer for every `i`."""
    return events("tool_use_two_turns").replace(b"3 files.", f"{i} files{'!' * (8 * i)}".encode())


def answer(i: int) -> str:
    return f"There are {i} files{'!' * (8 * i)}"


def test_copytruncate_is_seen_even_when_the_file_grew_back_before_the_next_read(tmp_path: Path) -> None:
    log = tmp_path / "stdout.ndjson"
    log.write_bytes(numbered_run(0))
    follower = Follower(log, "--results-only")
    assert follower.read_frames(1)[0]["result"] == answer(0)
    rounds = 40
    for i in range(1, rounds + 1):
        # copytruncate, then a busy writer: cut and longer again before the follower reads
        follower.proc.send_signal(signal.SIGSTOP)
        with open(log, "r+b") as f:
            f.truncate(0)
            f.write(numbered_run(i))
        follower.proc.send_signal(signal.SIGCONT)
        assert follower.read_frames(1)[0]["result"] == answer(i)
    for i in range(rounds + 1, 2 * rounds + 1):  # and at full speed, as fast as it reads
        with open(log, "r+b") as f:
            f.truncate(0)
            f.write(numbered_run(i))
        assert follower.read_frames(1)[0]["result"] == answer(i)
    status, rest, err = follower.stop()
    assert status == 143 and rest == b""
    assert err == b""  # not one line read from the middle


def test_a_file_not_there_yet_is_said_once_and_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "not-yet" / "stdout.ndjson"  # nor its directory: a typo would look the same
    follower = Follower(log)
    assert follower.proc.stderr is not None
    ready, _, _ = select.select([follower.proc.stderr], [], [], 30)
    if not ready:
        follower.proc.kill()  # not left behind by a failing test
    assert ready, "the follower did not say what it waits for"
    waiting = f"translator: --follow {log}: No such file or directory (yet); waiting for it\n"
    assert follower.proc.stderr.readline().decode() == waiting
    log.parent.mkdir()
    log.write_bytes(events("thinking"))
    assert follower.read_frames(3)[-1]["result"] == "17 * 23 = 391."
    log.unlink()  # gone again (rotated away): waited for without a word, it was seen once
    time.sleep(0.5)
    log.write_bytes(events("max_turns"))
    assert follower.read_frames(5)[-1]["subtype"] == "max_turns"
    status, _, err = follower.stop()
    assert (status, err) == (143, b"")


def test_a_log_of_another_user_it_cannot_read_is_waited_for_with_healthz_503(tmp_path: Path) -> None:
    """A worker under `umask 077` as another uid: the sidecar says so once, stays up (its
    /healthz 503, naming the file) instead of exiting 74, and translates once it can read.
    As root, the follower runs without capabilities (setpriv), so the file's mode holds for it."""
    log = tmp_path / "stdout.ndjson"
    log.write_bytes(events("thinking"))
    log.chmod(0o600)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        os.chown(log, 65534, 65534)  # the worker's: nobody
        prefix = ("setpriv", "--bounding-set=-all")  # (util-linux, in Debian's base)
    else:
        log.chmod(0o000)
    follower = Follower(log, "--metrics", "tcp:127.0.0.1:0", prefix=prefix)
    try:
        port = port_of(follower.proc)
        assert follower.proc.stderr is not None
        said = follower.proc.stderr.readline().decode()
        assert said == (f"translator: --follow {log}: Permission denied; waiting until it can be read "
                        f"(this translator runs as uid {os.geteuid()})\n")
        assert poll(lambda: health(port)[0] == 503) and health(port) == (503, f"unhealthy: {log}: not readable\n")
        time.sleep(1.0)
        assert follower.proc.poll() is None  # still there (it exited 74)
        log.chmod(0o644)  # the worker's umask fixed
        assert follower.read_frames(3)[-1]["result"] == "17 * 23 = 391."
        assert poll(lambda: health(port)[0] == 200)
    finally:
        status, _, err = follower.stop()
    assert (status, err) == (143, b"")
