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
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_fixtures import FIXTURES, SUPPORT, events
from support_processes import Follower, Live, Server, append, exchange, fixture, poll, run

from translator.encoders.observed import NAMESPACE, session_id_of
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
    names = {mode: [Path(p).stem for p in files] for mode, files in made.items()}
    assert all(len(n) == 1 for n in names.values()), names
    # one id per stream: --session-id's (the service is given one), else a file's from its full path (the
    # same in the batch), else (stdin, a pipe) a random one
    assert names["file"] == names["batch"] == [session_id_of(str(log))] and names["listen"] == ["SESSION"]
    assert (names["gzip"], names["follow"]) == ([session_id_of(str(gz))], [session_id_of(str(tmp_path / "followed.ndjson"))])
    assert len({n[0] for n in names.values()}) == 6 and all(uuid.UUID(names[m][0]) for m in ("stdin", "pipe"))
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


def test_headless_input_splits_the_runs_usage_across_its_turns_marked_as_an_estimate(tmp_path: Path, ccusage: Any) -> None:
    """caliban's headless stream-json reports usage and cost once, in its result: split evenly
    across the run's API calls, each line saying so, the sums the result's."""
    log = str(FIXTURES / "headless" / "tool_use_two_turns.jsonl")
    assert run("--transcripts", str(tmp_path / "claude"), log).returncode == 0
    report = ccusage(tmp_path / "claude", "session")
    assert counted(report) == result_usage(log)
    (path,) = (tmp_path / "claude").rglob("*.jsonl")
    calls = {ln["message"]["id"]: ln for ln in lines_of(path.read_bytes()) if ln.get("type") == "assistant"}
    (first, second) = calls.values()
    assert [first["message"]["usage"]["output_tokens"], second["message"]["usage"]["output_tokens"]] == [28, 29]  # 57
    assert {first["usageEstimate"], second["usageEstimate"]} == {"caliban -p: the run's totals split evenly across its API calls"}
    (result,) = lines_of(run("--format", "claude-code", "--results-only", log).stdout)
    assert first["costUSD"] + second["costUSD"] == pytest.approx(result["total_cost_usd"]) == report["totals"]["totalCost"]


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
    """caliban's headless init names the session (its id, a UUID as caliban makes them; the
    fixture's placeholder replaced) and its cwd (the project folder); `--replay-user-messages`
    echoes each prompt: two prompts in one run read back in their places, the last one the summary."""
    from claude_agent_sdk import get_session_messages, list_sessions

    own = "3b8e1c52-8f0a-4d6b-9c1e-2a7f5d4e6b10"
    log = tmp_path / "replay.jsonl"
    log.write_bytes((FIXTURES / "headless" / "multi_input_frames.replay.jsonl").read_bytes().replace(
        b'"session_id":"SESSION"', b'"session_id":"%s"' % own.encode()))
    done = run("--transcripts", str(tmp_path / "claude"), str(log))
    assert done.returncode == 0
    (path,) = files_of(tmp_path / "claude")
    assert path == f"projects/{slug('/home/dev/project')}/{own}.jsonl"
    assert {orjson.loads(f).get("session_id") for f in done.stdout.splitlines()} - {None} == {own}  # the frames' too
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    (info,) = list_sessions(directory="/home/dev/project")
    assert (info.cwd, info.first_prompt, info.summary, info.session_id) == ("/home/dev/project", "hi", "what is 2+2?", own)
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


PROVIDER_ERRORS = ("api_error", "api_error_400", "api_error_overloaded")


def test_one_id_per_log_in_its_frames_and_its_session_file_the_same_on_every_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fixture and a byte-identical copy of one at another path: N logs, N sessions, each
    named by its path's id in its frames, its file's name and its lines' sessionId, replay after
    replay; the provider-error runs included, with the lines the CLI writes for one."""
    logs = tmp_path / "logs"
    (logs / "copy").mkdir(parents=True)
    for path in FIXTURES.glob("*.events.jsonl"):
        shutil.copy(path, logs / path.name)
    shutil.copy(FIXTURES / "tool_use_two_turns.events.jsonl", logs / "copy" / "tool_use_two_turns.events.jsonl")
    paths = sorted(str(p) for p in logs.rglob("*.jsonl"))
    config = tmp_path / "claude"
    done = run("--format", "claude-code", "--transcripts", str(config), *paths)
    assert done.returncode == 0, done.stderr
    first = files_of(config)
    ids = {session_id_of(p) for p in paths}
    assert len(ids) == len(paths) and {Path(name).stem for name in first} == ids
    assert {f["session_id"] for f in lines_of(done.stdout)} == ids
    for data in first.values():
        lines = lines_of(data)
        assert {ln["sessionId"] for ln in lines} == {Path(next(n for n, d in first.items() if d == data)).stem}
        times = [ln["timestamp"] for ln in lines if "timestamp" in ln]
        assert times == sorted(times)  # never a line stamped before the one above it
    again = run("--format", "claude-code", "--transcripts", str(config), *paths)
    assert files_of(config) == first and {f["session_id"] for f in lines_of(again.stdout)} == ids
    from claude_agent_sdk import list_sessions

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    assert {s.session_id for s in list_sessions()} == ids  # the Python SDK's reader: N logs, N sessions


@pytest.mark.parametrize("name", PROVIDER_ERRORS)
def test_a_provider_error_leaves_the_lines_the_cli_writes(tmp_path: Path, name: str) -> None:
    """The prompt, then the CLI's synthetic answer (model `<synthetic>`, no usage, the error's text,
    status and type, fixtures/claude-code/api_error_400.session.jsonl as recorded), then last-prompt;
    its text the result frame's."""
    config = tmp_path / "claude"
    done = run("--format", "claude-code", "--transcripts", str(config), fixture(name))
    (data,) = files_of(config).values()
    lines = lines_of(data)
    assert [ln["type"] for ln in lines] == ["user", "assistant", "last-prompt"]
    answer = lines[1]
    recorded = next(ln for ln in lines_of((FIXTURES / "claude-code" / "api_error_400.session.jsonl").read_bytes())
                    if ln["type"] == "assistant")
    kept = {"parentUuid", "isSidechain", "type", "uuid", "timestamp", "message", "error", "isApiErrorMessage",
            "apiErrorStatus", "apiErrorType", "userType", "entrypoint", "cwd", "sessionId", "version"}
    assert set(answer) == kept and kept <= set(recorded)
    assert (answer["isApiErrorMessage"], answer["message"]["model"], answer["message"]["stop_reason"]) == (
        True, "<synthetic>", "stop_sequence")
    assert set(answer["message"]["usage"].values()) == {0} and set(answer["message"]["usage"]) <= set(
        recorded["message"]["usage"])
    result = lines_of(done.stdout)[-1]
    assert answer["message"]["content"] == [{"type": "text", "text": result["result"]}]
    assert (answer["apiErrorStatus"], answer["apiErrorType"]) == (result["api_error_status"], result["api_error_type"])
    if name == "api_error_400":  # the recorded one, key for key where caliban says the same
        assert answer["message"]["content"] == recorded["message"]["content"]
        assert [answer[k] for k in ("error", "apiErrorStatus", "apiErrorType")] == [
            recorded[k] for k in ("error", "apiErrorStatus", "apiErrorType")]
    assert answer["parentUuid"] == lines[0]["uuid"] and lines[2]["leafUuid"] == answer["uuid"]


def test_the_frames_ccusage_and_the_results_table_tell_one_story(tmp_path: Path, ccusage: Any) -> None:
    """One log: the same session id, tokens by type and cost in its result frame, in what ccusage
    computes from its session file, and in its row of the results table (whose `input_tokens` is
    the default format's, caliban's: the cache counters included)."""
    import duckdb

    log = tmp_path / "logs" / "agent.ndjson"
    log.parent.mkdir()
    log.write_bytes(events("tool_use_two_turns"))
    config, table = tmp_path / "claude", tmp_path / "table"
    done = run("--format", "claude-code", "--results-only", "--transcripts", str(config), str(log))
    (result,) = lines_of(done.stdout)
    report = ccusage(config, "session")
    (session,) = report["session"]
    assert session["period"] == result["session_id"] == session_id_of(str(log))
    assert session["totalCost"] == pytest.approx(result["total_cost_usd"])
    assert counted(report) == {key: result["usage"][key] for key in COUNTERS.values()}
    assert run("--results-table", str(table), str(log), timeout=120).returncode == 0
    (row,) = duckdb.connect().execute(f"select session_id, total_cost_usd, input_tokens, output_tokens, "
                                      f"cache_read_input_tokens, cache_creation_input_tokens "
                                      f"from read_parquet('{table}/**/*.parquet', hive_partitioning = true)").fetchall()
    sid, cost, whole_input, output, read, made = row
    assert (sid, output, read, made) == (result["session_id"], result["usage"]["output_tokens"],
                                         result["usage"]["cache_read_input_tokens"],
                                         result["usage"]["cache_creation_input_tokens"])
    assert whole_input - read - made == result["usage"]["input_tokens"] and cost == pytest.approx(result["total_cost_usd"])


@pytest.mark.parametrize("own", ["../../../PWNED", "/tmp/PWNED", "..", "a/b"])
def test_a_logs_own_id_never_makes_a_path_outside_its_project_folder(tmp_path: Path, own: str) -> None:
    """A headless log's init names its session; that id is data (a log, a --listen client), so
    one that is no plain file name names its file by a uuid5 of it, inside the project folder,
    and the frames still carry it."""
    log = tmp_path / "own.jsonl"
    log.write_bytes(
        (FIXTURES / "headless" / "max_turns.jsonl").read_bytes().replace(b'"SESSION"', orjson.dumps(own))
    )
    config = tmp_path / "cfg" / "a" / "b"
    done = run("--format", "claude-code", "--transcripts", str(config), str(log))
    assert done.returncode == 0, done.stderr
    assert {ln["session_id"] for ln in lines_of(done.stdout)} == {own}
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    name = uuid.uuid5(NAMESPACE, own)
    assert made == [f"cfg/a/b/projects/{slug('/home/dev/project')}/{name}.jsonl", "own.jsonl"]
    assert {ln["sessionId"] for ln in lines_of((config / "projects" / slug("/home/dev/project") / f"{name}.jsonl").read_bytes())} == {own}


def test_a_full_disk_leaves_the_session_file_as_it_was_and_nothing_beside_it(tmp_path: Path) -> None:
    """A log translated again rewrites its session file by a new one renamed over it; a disk that
    fills meanwhile leaves the old file whole and no half-written one beside it (a real full
    filesystem: a small tmpfs)."""
    config = tmp_path / "claude"
    config.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(config)],
                                           capture_output=True).returncode:  # fmt: skip
        pytest.skip("needs root to mount a small tmpfs")
    try:
        assert run("--transcripts", str(config), fixture("tool_use_two_turns")).returncode == 0
        before = files_of(config)
        assert len(before) == 1
        filler = os.open(config / "filler", os.O_WRONLY | os.O_CREAT)  # the disk filled to its last byte
        with pytest.raises(OSError):
            while os.write(filler, b"\0" * 4096):
                pass
        os.close(filler)
        again = run("--transcripts", str(config), fixture("tool_use_two_turns"))
        assert again.returncode == 0 and b"No space left on device" in again.stderr
        assert files_of(config) == before
        assert sorted(p.name for p in config.rglob("*") if p.is_file() and p.suffix == ".tmp") == []
    finally:
        subprocess.run(["umount", str(config)], check=True)
