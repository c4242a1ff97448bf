"""`translator --transcripts DIR`: each input stream's runs as a Claude Code session file, read
back by the real readers: the Python Agent SDK's list_sessions/get_session_messages, the
TypeScript SDK's listSessions/getSessionMessages (npm, under node) and ccusage 20.0.24 (npm),
whose totals must be the result frames' usage, counted once however often a log is translated."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, SUPPORT, events
from support_processes import Follower, Live, Server, append, exchange, fixture, poll, run

from translator.transcripts.files import slug
from translator.transcripts.lines import iso

LOGS = ["tool_use_two_turns", "thinking", "max_turns", "multi_input_frames"]
COUNTERS = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
            "cacheCreationTokens": "cache_creation_input_tokens", "cacheReadTokens": "cache_read_input_tokens"}  # fmt: skip
SESSIONS = SUPPORT / "ts_sdk" / "sessions.mjs"


def files_of(config: Path) -> dict[str, bytes]:
    return {p.relative_to(config).as_posix(): p.read_bytes() for p in sorted(config.rglob("*.jsonl"))}


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(ln) for ln in data.splitlines()]


def conversation(data: bytes) -> list[tuple[str, Any]]:
    """What a session file says, without its times and places: each line's type and message."""
    return [(ln["type"], ln.get("message", ln.get("lastPrompt"))) for ln in lines_of(data)]


def result_usage(*args: str) -> dict[str, int]:
    """The sum of the result frames' usage (Claude Code's counters: cache apart from input)."""
    done = run("--format", "claude-code", "--results-only", *args)
    total = dict.fromkeys(COUNTERS.values(), 0)
    for frame in lines_of(done.stdout):
        for key in total:
            total[key] += frame["usage"][key]
    return total


def counted(report: dict[str, Any]) -> dict[str, int]:
    return {COUNTERS[k]: report["totals"][k] for k in COUNTERS}


def test_a_replayed_log_reads_back_as_its_conversation_with_the_python_sdk(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from claude_agent_sdk import get_session_messages, list_sessions

    config = tmp_path / "claude"
    done = run("--transcripts", str(config), fixture("tool_use_two_turns"))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    (info,) = list_sessions()
    assert (info.summary, info.first_prompt, info.cwd) == ("how many files are here?", "how many files are here?", str(FIXTURES))
    assert list_sessions(directory=str(FIXTURES)) == [info]
    (path,) = files_of(config)
    assert path == f"projects/{slug(str(FIXTURES))}/{info.session_id}.jsonl"
    messages = get_session_messages(info.session_id)
    blocks = [(m.type, block["type"]) for m in messages for block in m.message["content"]]
    assert blocks == [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"),
                      ("assistant", "text")]  # fmt: skip
    assert messages[-1].message["content"][0]["text"] == "There are 3 files."
    assert messages[3].message["content"][0]["content"] == [{"type": "text", "text": "3"}]
    # one response, two blocks: two lines, the same message id and usage (ccusage counts it once)
    assert messages[1].message["id"] == messages[2].message["id"] and messages[1].message["usage"] == messages[2].message["usage"]
    assert messages[1].message["usage"] == {"input_tokens": 4, "cache_creation_input_tokens": 1048,
                                            "cache_read_input_tokens": 2048, "output_tokens": 48}  # fmt: skip
    assert {m.session_id for m in messages} == {info.session_id}


def test_ccusage_counts_the_result_frames_usage_once_however_often_translated(tmp_path: Path, ccusage: Any) -> None:
    config = tmp_path / "claude"
    paths = [fixture(name) for name in LOGS]
    assert run("--transcripts", str(config), *paths).returncode == 0
    first = files_of(config)
    assert len(first) == len(LOGS)  # one session per input stream
    assert run("--transcripts", str(config), *paths).returncode == 0
    assert files_of(config) == first  # the same files, byte for byte
    expected = result_usage(*paths)
    sessions, daily = ccusage(config, "session"), ccusage(config, "daily")
    assert counted(sessions) == counted(daily) == expected
    assert len(sessions["session"]) == len(LOGS)
    assert sessions["totals"]["totalCost"] > 0  # priced by message.model


def test_two_logs_never_share_a_file_and_each_has_its_own_runs(tmp_path: Path, ccusage: Any) -> None:
    config = tmp_path / "claude"
    names = ("tool_use_two_turns", "thinking")
    for name in names:
        assert run("--transcripts", str(config), fixture(name)).returncode == 0
    assert len(files_of(config)) == 2
    per_session = sorted(sum(s[k] for k in COUNTERS) for s in ccusage(config, "session")["session"])
    assert per_session == sorted(sum(result_usage(fixture(n)).values()) for n in names)


def test_a_runs_usage_split_as_claude_code_splits_it() -> None:
    """input_tokens without the cache counters, which go apart (the agent counts them in input)."""
    done = run("--format", "claude-code", "--results-only", fixture("tool_use_two_turns"))
    assert lines_of(done.stdout)[0]["usage"]["input_tokens"] == 64  # 6376 - 1168 - 5144


def test_every_mode_writes_the_same_session(tmp_path: Path) -> None:
    data = events("tool_use_two_turns")
    log = tmp_path / "logs" / "agent.ndjson"
    log.parent.mkdir()
    log.write_bytes(data)
    made: dict[str, dict[str, bytes]] = {}

    assert run("--transcripts", str(tmp_path / "file"), str(log)).returncode == 0
    assert run("--transcripts", str(tmp_path / "stdin"), stdin=data).returncode == 0
    pipe = Live("--transcripts", str(tmp_path / "pipe"))
    pipe.send(data)
    pipe.proc.stdin.close()  # type: ignore[union-attr]
    assert pipe.proc.wait(timeout=20) == 0
    follower = Follower(tmp_path / "followed.ndjson", "--transcripts", str(tmp_path / "follow"))
    append(tmp_path / "followed.ndjson", data)
    poll(lambda: files_of(tmp_path / "follow") if (tmp_path / "follow").exists() else None)
    follower.stop()
    server = Server(f"unix:{tmp_path / 's.sock'}", "--transcripts", str(tmp_path / "listen"))
    exchange(server.connect(), data)
    server.stop()
    assert run("--out-dir", str(tmp_path / "out"), "--transcripts", str(tmp_path / "batch"), str(log)).returncode == 0
    gz = tmp_path / "gz" / "agent.ndjson.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(data))
    assert run("--transcripts", str(tmp_path / "gzip"), str(gz)).returncode == 0
    for mode in ("file", "stdin", "pipe", "follow", "listen", "batch", "gzip"):
        made[mode] = files_of(tmp_path / mode)
    names = {mode: [Path(p).name for p in files] for mode, files in made.items()}
    assert all(len(n) == 1 for n in names.values()), names
    assert len({n[0] for n in names.values()}) == 1, names  # named from the log's first turn, in every mode
    said = {mode: conversation(next(iter(files.values()))) for mode, files in made.items()}
    assert all(s == said["file"] for s in said.values())
    assert [t for t, _ in said["file"]] == ["user", "assistant", "assistant", "user", "assistant", "last-prompt"]
    assert next(iter(made["file"])).startswith(f"projects/{slug(str(log.parent))}/")
    assert next(iter(made["stdin"])).startswith(f"projects/{slug(os.getcwd())}/")  # no folder: the working directory


def test_a_logs_recorded_times_are_the_files_and_the_days_ccusage_reports(tmp_path: Path, ccusage: Any) -> None:
    lines = events("tool_use_two_turns").splitlines()
    ends = [n for n, line in enumerate(lines) if b'"TurnEnd"' in line]
    base = datetime(2026, 3, 15, tzinfo=UTC).timestamp() - (ends[0] + ends[1]) / 2 * 0.25  # midnight between the turns
    stamped = []
    for n, line in enumerate(lines):
        ev = orjson.loads(line)
        ev["ts"] = base + n * 0.25
        stamped.append(orjson.dumps(ev))
    log = tmp_path / "stamped.ndjson"
    log.write_bytes(b"\n".join(stamped) + b"\n")
    assert run("--transcripts", str(tmp_path / "claude"), str(log)).returncode == 0
    (data,) = files_of(tmp_path / "claude").values()
    times = [ln["timestamp"] for ln in lines_of(data) if "timestamp" in ln]
    assert times[0] == iso(base)  # the run's first event
    assert times[-1] == iso(base + ends[1] * 0.25)  # the last turn's end
    days = [d["period"] for d in ccusage(tmp_path / "claude", "daily")["daily"]]
    assert days == ["2026-03-14", "2026-03-15"]


def test_a_logs_estimated_times_start_at_its_files_time(tmp_path: Path) -> None:
    log = tmp_path / "old.ndjson"
    log.write_bytes(events("tool_use_two_turns"))
    then = datetime(2025, 7, 4, 12, 0, tzinfo=UTC).timestamp()
    os.utime(log, (then, then))
    for out in ("a", "b"):
        assert run("--transcripts", str(tmp_path / out), str(log)).returncode == 0
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")
    (data,) = files_of(tmp_path / "a").values()
    times = [ln["timestamp"] for ln in lines_of(data) if "timestamp" in ln]
    assert times[0] == "2025-07-04T12:00:00.000Z" and times == sorted(times)


def test_headless_input_puts_the_runs_usage_on_its_last_turn(tmp_path: Path, ccusage: Any) -> None:
    """caliban's headless stream-json reports usage once, in its result: it is not lost."""
    log = str(FIXTURES / "headless" / "multi_input_frames.jsonl")
    assert run("--transcripts", str(tmp_path / "claude"), log).returncode == 0
    assert counted(ccusage(tmp_path / "claude", "session")) == result_usage(log)


def test_the_typescript_sdk_reads_the_same_sessions(sdk: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    assert run("--transcripts", str(config), fixture("tool_use_two_turns"), fixture("thinking")).returncode == 0
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
    done = subprocess.run(["node", str(SESSIONS), str(sdk), str(FIXTURES)], capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    assert sorted(s["firstPrompt"] for s in read["sessions"]) == sorted(s["firstPrompt"] for s in read["inDir"])
    (tool,) = [s for s in read["sessions"] if s["firstPrompt"] == "how many files are here?"]
    assert tool["cwd"] == str(FIXTURES)
    kinds = [(m["type"], b["type"]) for m in read["messages"][tool["sessionId"]] for b in m["message"]["content"]]
    assert kinds == [("user", "text"), ("assistant", "text"), ("assistant", "tool_use"), ("user", "tool_result"),
                     ("assistant", "text")]  # fmt: skip


@pytest.mark.slow
def test_a_fleet_replay_writes_what_the_local_batch_writes(tmp_path: Path, ccusage: Any) -> None:
    logs = tmp_path / "logs"
    for n, name in enumerate(LOGS):
        (logs / f"host-{n % 2}").mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture(name), logs / f"host-{n % 2}" / f"{name}.ndjson")
    local = run("--out-dir", str(tmp_path / "local"), "--transcripts", str(tmp_path / "a"), str(logs), timeout=120)
    fleet = run("--out-dir", str(tmp_path / "fleet"), "--cluster", "local:1", "--transcripts", str(tmp_path / "b"),
                str(logs), timeout=240)  # fmt: skip
    assert local.returncode == 0 and fleet.returncode == 0, fleet.stderr
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b") and len(files_of(tmp_path / "a")) == len(LOGS)
    assert counted(ccusage(tmp_path / "b", "daily")) == result_usage(*(str(p) for p in sorted(logs.rglob("*.ndjson"))))


def test_a_transcripts_dir_that_cannot_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    refused = run("--transcripts", str(tmp_path / "file"), fixture("thinking"))
    assert (refused.returncode, refused.stdout) == (73, b"")
    assert refused.stderr == f"translator: --transcripts {tmp_path / 'file'}: is not a directory\n".encode()
    url = run("--transcripts", "s3://bucket/claude", fixture("thinking"))
    assert url.returncode == 64 and url.stderr.endswith(b"must be a local directory (a Claude config dir)\n")


def test_a_session_file_that_cannot_be_written_is_said_once_and_the_translation_goes_on(tmp_path: Path) -> None:
    (tmp_path / "claude").mkdir()
    (tmp_path / "claude" / "projects").write_text("")  # its folder cannot be made
    done = run("--transcripts", str(tmp_path / "claude"), fixture("multi_input_frames"))
    assert done.returncode == 0
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and said[0].startswith(f"translator: --transcripts: {tmp_path / 'claude' / 'projects'}/"), said
    assert sum(b'"type":"result"' in line for line in done.stdout.splitlines()) == 2  # both runs' results


def test_a_headless_log_is_filed_under_its_own_cwd_with_its_echoed_prompts(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """caliban's headless init names the run's cwd (the project folder); `--replay-user-messages`
    echoes each prompt: two prompts in one run read back in their places, the last one the summary."""
    from claude_agent_sdk import get_session_messages, list_sessions

    log = FIXTURES / "headless" / "multi_input_frames.replay.jsonl"
    assert run("--transcripts", str(tmp_path / "claude"), str(log)).returncode == 0
    (path,) = files_of(tmp_path / "claude")
    assert path.startswith(f"projects/{slug('/home/dev/project')}/")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    (info,) = list_sessions(directory="/home/dev/project")
    assert (info.cwd, info.first_prompt, info.summary) == ("/home/dev/project", "hi", "what is 2+2?")
    said = [(m.type, m.message["content"][0]["text"]) for m in get_session_messages(info.session_id)]
    assert said == [("user", "hi"), ("assistant", "Hello! How can I help?"), ("user", "what is 2+2?"), ("assistant", "2 + 2 = 4.")]


def test_a_live_pipe_writes_each_run_as_its_frames_go_out(tmp_path: Path) -> None:
    """In a live pipe a run's lines are in its file once its result is out, the input still open."""
    pipe = Live("--transcripts", str(tmp_path / "claude"))
    try:
        pipe.send(events("tool_use_two_turns"))
        frames = pipe.read_frames(6)
        assert frames[-1]["type"] == "result"
        written = poll(lambda: files_of(tmp_path / "claude") if (tmp_path / "claude").exists() else None)
        (data,) = written.values()
        assert [t for t, _ in conversation(data)] == ["user", "assistant", "assistant", "user", "assistant", "last-prompt"]
        assert pipe.proc.poll() is None  # still reading
    finally:
        pipe.proc.stdin.close()  # type: ignore[union-attr]
        assert pipe.proc.wait(timeout=20) == 0
