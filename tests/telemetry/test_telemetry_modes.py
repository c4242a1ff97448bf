"""The telemetry in the translator's other modes, as real processes against a loopback OTLP/HTTP
receiver: `--follow` exporting while it runs, a stop signal flushing what the closed runs gave,
`--listen` with a session per connection, and a replay of stamped events exported at the times
the runs happened (a backfill lands on their day, not the replay's)."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from support_otlp import Receiver, receiver, telemetry_env, token_sums
from support_processes import TRANSLATOR, Follower, Live, append, fixture, sessions_over

FIXTURE = Path(fixture("tool_use_two_turns"))
TWO_TURNS = {"input": 64, "output": 57, "cacheRead": 5144, "cacheCreation": 1168}


def named(items: list[dict[str, Any]], body: str) -> list[dict[str, Any]]:
    return [r for r in items if r.get("body") == body or r.get("name") == body]


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A receiver, and the telemetry switched on for the processes this test starts."""
    with receiver() as (got, endpoint):
        for key, value in telemetry_env(endpoint, "http/protobuf", OTEL_METRIC_EXPORT_INTERVAL="200",
                                        OTEL_LOGS_EXPORT_INTERVAL="200", OTEL_TRACES_EXPORT_INTERVAL="200").items():
            monkeypatch.setenv(key, value)
        yield got


def test_follow_exports_while_it_runs_and_flushes_on_sigterm(collector: Receiver, tmp_path: Path) -> None:
    log = tmp_path / "agent.ndjson"
    follower = Follower(log)
    try:
        append(log, FIXTURE.read_bytes())
        while follower.read_frames(1)[0]["type"] != "result":
            pass
        # the run's events and spans reach the collector while the follower still runs
        assert collector.wait(lambda r: len(named(r.logs, "claude_code.api_request")) == 2
                              and len(named(r.spans, "claude_code.interaction")) == 1)
        assert follower.proc.poll() is None
    finally:
        status, _, err = follower.stop()
    assert (status, err) == (128 + signal.SIGTERM, b"")
    assert token_sums(collector.metrics) == TWO_TURNS  # the last metrics flushed at the stop
    assert {p["name"] for p in collector.metrics} >= {"claude_code.session.count", "claude_code.active_time.total"}


def test_a_stop_signal_closes_the_open_run_and_flushes_what_it_gave(collector: Receiver) -> None:
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    live = Live("--format", "claude-code")
    live.send(b"".join(lines[:9]))  # the first turn, its tool call and its TurnEnd
    assert collector.wait(lambda r: bool(named(r.logs, "claude_code.api_request")))  # exported as it came
    live.proc.send_signal(signal.SIGTERM)
    status, out, _ = live.finish()
    assert status == 128 + signal.SIGTERM
    result = [orjson.loads(line) for line in out.splitlines()][-1]
    assert result["type"] == "result" and result["is_error"]
    assert collector.wait(lambda r: bool(named(r.spans, "claude_code.interaction")), timeout=5)
    assert [r["attributes"]["input_tokens"] for r in named(collector.logs, "claude_code.api_request")] == [4]
    assert [r["attributes"]["tool_name"] for r in named(collector.logs, "claude_code.tool_result")] == ["Bash"]
    assert token_sums(collector.metrics) == {"input": 4, "output": 48, "cacheRead": 2048, "cacheCreation": 1048}


def test_listen_makes_a_session_per_connection(collector: Receiver, tmp_path: Path) -> None:
    address = tmp_path / "t.sock"
    server = subprocess.Popen([TRANSLATOR, "--listen", f"unix:{address}"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sessions = sessions_over(address, FIXTURE.read_bytes())
    assert collector.wait(lambda r: len(named(r.spans, "claude_code.interaction")) == 2)
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=20) == 128 + signal.SIGTERM
    counted = {p["attributes"]["session.id"]: p["value"] for p in named(collector.metrics, "claude_code.session.count")}
    assert counted == dict.fromkeys(sessions, 1.0) and len(set(sessions)) == 2
    assert {r["attributes"]["session.id"] for r in named(collector.logs, "claude_code.api_request")} == set(sessions)


def test_a_replay_of_stamped_events_exports_them_at_their_own_times(tmp_path: Path) -> None:
    """A backfill: each event at the time it happened (months before the replay); the export's
    own time is only `observedTimeUnixNano`."""
    base = datetime(2026, 1, 15, 9, 30, tzinfo=UTC).timestamp()
    stamped = tmp_path / "old.events.jsonl"
    stamps = [base + 0.25 * n for n in range(len(FIXTURE.read_bytes().splitlines()))]
    stamped.write_bytes(b"".join(orjson.dumps({**orjson.loads(line), "ts": t}) + b"\n"
                                 for line, t in zip(FIXTURE.read_bytes().splitlines(), stamps, strict=True)))
    with receiver() as (got, endpoint):
        began = time.time_ns()
        done = subprocess.run([TRANSLATOR, str(stamped)], env=telemetry_env(endpoint, "http/json"),
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
    at = {n: int(t * 1e9) for n, t in enumerate(stamps)}
    # the first turn's model part ends at its tool call (line 5), the second turn's at its TurnEnd (line 13)
    assert [r["time"] for r in named(got.logs, "claude_code.api_request")] == [at[4], at[12]]
    assert [r["time"] for r in named(got.logs, "claude_code.tool_result")] == [at[7]]
    assert named(got.logs, "claude_code.user_prompt")[0]["time"] == at[0]
    assert all(r["observed"] >= began for r in got.logs)
    assert {datetime.fromtimestamp(r["time"] / 1e9, UTC).date().isoformat() for r in got.logs} == {"2026-01-15"}
    interaction = named(got.spans, "claude_code.interaction")[0]
    assert (interaction["start"], interaction["end"]) == (at[0], at[13])
    tool = named(got.spans, "claude_code.tool")[0]
    assert (tool["start"], tool["end"], tool["attributes"]["duration_ms"]) == (at[4], at[7], 750)


def batch_sessions(out: Path) -> set[str]:
    return {orjson.loads(path.read_bytes().splitlines()[-1])["session_id"] for path in out.rglob("*.jsonl")}


@pytest.mark.parametrize("where", [["--jobs", "2"], ["--cluster", "local:1"]], ids=["local", "fleet"])
def test_a_batch_exports_every_file_as_its_own_session(tmp_path: Path, where: list[str]) -> None:
    """--out-dir on local workers and on a Dask cluster: each worker exports what its files
    gave, flushed after each chunk (a worker may never exit)."""
    logs = tmp_path / "logs"
    for name in ("a", "b", "c/d"):
        (logs / name).parent.mkdir(parents=True, exist_ok=True)
        (logs / f"{name}.events.jsonl").write_bytes(FIXTURE.read_bytes())
    with receiver() as (got, endpoint):
        done = subprocess.run([TRANSLATOR, "--out-dir", str(tmp_path / "out"), *where, str(logs)],
                              env=telemetry_env(endpoint, "http/protobuf"), capture_output=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert got.wait(lambda r: len(named(r.spans, "claude_code.interaction")) == 3)
        assert got.wait(lambda r: sum(p["value"] for p in named(r.metrics, "claude_code.session.count")) == 3)
    sessions = batch_sessions(tmp_path / "out")
    assert len(sessions) == 3
    assert {p["attributes"]["session.id"] for p in named(got.metrics, "claude_code.session.count")} == sessions
    assert {r["attributes"]["session.id"] for r in named(got.logs, "claude_code.api_request")} == sessions
    assert token_sums(got.metrics) == {kind: 3 * n for kind, n in TWO_TURNS.items()}
