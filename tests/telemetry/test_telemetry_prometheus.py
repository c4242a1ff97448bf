"""`OTEL_METRICS_EXPORTER=prometheus`, scraped during a live session as the CLI 2.1.333's own
endpoint was (fixtures/cc-2.1.333/otel-prometheus/): in --follow, --listen and caliban-claude,
the recorded names, HELP texts and label keys, the frames' values, cumulative across the runs;
only /metrics; the host and port variables honoured, both loopbacks answering without a host.
A one-shot replay says in one line that its endpoint would show nothing."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage
from support_otlp import HEADLESS, SHIM, caliban_env, closed_port
from support_processes import TRANSLATOR, Follower, append, fixture, poll, read_all, sessions_over

from translator.scrape_server import BUSY, CONNECTION_TIMEOUT_S, MAX_SCRAPES

FIXTURE = Path(fixture("tool_use_two_turns"))
RECORDED = Path(__file__).parents[2] / "fixtures" / "cc-2.1.333" / "otel-prometheus"
TWO_TURNS = {"input": 64, "output": 57, "cacheRead": 5144, "cacheCreation": 1168}
SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def prometheus_env(port: int, host: str | None = "127.0.0.1") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    return env | {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "prometheus",
                  "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)} | ({} if host is None else {
                      "OTEL_EXPORTER_PROMETHEUS_HOST": host})


def scrape(port: int, path: str = "/metrics", host: str = "127.0.0.1") -> tuple[int, list[tuple[str, str]], str]:
    connection = http.client.HTTPConnection(host, port, timeout=10)
    connection.request("GET", path)
    answer = connection.getresponse()
    status, headers, body = answer.status, answer.getheaders(), answer.read().decode()
    connection.close()
    return status, headers, body


def served(port: int, host: str = "127.0.0.1") -> str:
    """What /metrics shows now, "" while nothing listens yet (to poll on)."""
    try:
        return scrape(port, host=host)[2]
    except OSError:
        return ""


def read(text: str) -> dict[str, Any]:
    """An exposition text: HELP and TYPE per name, each sample's label keys (in order) and values."""
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            helps[name] = help_
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            types[name] = kind
        elif match := SAMPLE.match(line):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2]))
            samples[match[1]].append((labels, float(match[3])))
    return {"help": helps, "type": types, "samples": samples}


def shape(text: str) -> dict[str, Any]:
    got = read(text)
    return {name: (got["help"][name], got["type"][name], sorted({tuple(labels) for labels, _ in points}))
            for name, points in got["samples"].items()}


def tokens(text: str) -> dict[str, float]:
    return {labels["type"]: value for labels, value in read(text)["samples"]["claude_code_token_usage_total"]}


def check(text: str) -> None:
    """Claude Code's names, HELP, TYPE and label keys (in its order: the attributes, then the scope)."""
    theirs = (RECORDED / "prometheus_default.metrics.1.txt").read_text()
    assert shape(text) == shape(theirs)
    assert text.endswith("\n") and "# UNIT" not in text
    assert list(read(text)["samples"]) == list(read(theirs)["samples"])  # target_info first, then the CLI's order


def follow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: int,
           host: str | None = "127.0.0.1") -> tuple[Follower, Path]:
    """`translator --follow` of an empty log in `tmp_path`, serving its metrics on `port`: it, and the log."""
    for key, value in prometheus_env(port, host).items():
        monkeypatch.setenv(key, value)
    log = tmp_path / "agent.ndjson"
    log.touch()
    return Follower(log), log


def test_follow_serves_the_recorded_names_with_cumulative_values(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    follower, log = follow(tmp_path, monkeypatch, port)
    try:
        poll(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
        seen, ids = [], set()
        for _ in range(2):  # two runs of one stream: one session, its counters adding up
            append(log, FIXTURE.read_bytes())
            while (frame := follower.read_frames(1)[0])["type"] != "result":
                pass
            ids.add(frame["session_id"])
            poll(lambda: "claude_code_active_time_total" in scrape(port)[2] and tokens(scrape(port)[2])["input"]
                 == 64 * (len(seen) + 1))
            seen.append(scrape(port))
        missing = [scrape(port, path)[:3:2] for path in ("/", "/other")]
    finally:
        status, _, err = follower.stop()
    assert (status, err) == (128 + signal.SIGTERM, b"")
    (code, headers, first), (_, _, second) = seen
    assert code == 200 and [k for k, _ in headers] == ["content-type", "Date", "Connection", "Content-Length"]
    assert dict(headers)["content-type"] == "text/plain" and dict(headers)["Connection"] == "close"
    check(first)
    assert tokens(first) == TWO_TURNS
    assert tokens(second) == {k: 2 * v for k, v in TWO_TURNS.items()}  # cumulative, as the CLI's 7 -> 16
    sessions = {labels["session_id"] for labels, _ in read(second)["samples"]["claude_code_session_count_total"]}
    assert sessions == ids and len(ids) == 1
    assert missing == [(404, ""), (404, "")]


def test_without_a_host_both_loopbacks_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the CLI's `*:<port>`: the IPv6 wildcard, dual-stack."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    port = closed_port()
    follower, log = follow(tmp_path, monkeypatch, port, host=None)
    try:
        append(log, FIXTURE.read_bytes())
        while follower.read_frames(1)[0]["type"] != "result":
            pass
        poll(lambda: "claude_code_token_usage_total" in served(port))
        v4, v6 = scrape(port)[2], scrape(port, host="::1")[2]
    finally:
        follower.stop()
    assert tokens(v4) == tokens(v6) == TWO_TURNS


def test_the_endpoint_closes_a_quiet_connection_and_answers_one_over_the_cap_503(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint runs on the --metrics server (translator/scrape_server.py): a connection that
    sends half a request is closed after the timeout (it held a thread for ever), MAX_SCRAPES are
    served at once, the next answered 503 at once and given no thread, and a slot freed serves
    the next scrape."""
    port = closed_port()
    follower, log = follow(tmp_path, monkeypatch, port)

    def threads() -> int:
        with open(f"/proc/{follower.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("Threads:")).split()[1])

    def settled() -> int:  # the count once no scrape's thread is ending
        before = threads()
        time.sleep(0.5)
        return before if threads() == before else 0

    def hold() -> None:  # a byte more of a request line each: the held connections never go quiet
        for sock in held:
            sock.sendall(b"G")

    held: list[socket.socket] = []
    try:
        append(log, FIXTURE.read_bytes())
        while follower.read_frames(1)[0]["type"] != "result":
            pass
        poll(lambda: "claude_code_token_usage_total" in served(port))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as idle:
            idle.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
            began = time.monotonic()
            assert idle.recv(4096) == b""  # closed by the endpoint, unanswered
            assert CONNECTION_TIMEOUT_S - 1 < time.monotonic() - began < CONNECTION_TIMEOUT_S + 10
        base = poll(settled)
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(MAX_SCRAPES)]
        hold()
        poll(lambda: threads() == base + MAX_SCRAPES)  # each served on a thread of its own
        over = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(50)]
        hold()
        began = time.monotonic()
        assert [read_all(sock) for sock in over] == [BUSY] * 50
        assert time.monotonic() - began < 3  # at once, not after a wait or the quiet timeout
        assert threads() == base + MAX_SCRAPES
        held.pop().close()  # a slot freed: the next scrape is served
        hold()
        status, _, text = poll(lambda: (answer := _scraped(port)) and answer)
        assert status == 200 and tokens(text) == TWO_TURNS
    finally:
        for sock in held:
            sock.close()
        status, _, err = follower.stop()
    assert (status, err) == (128 + signal.SIGTERM, b"")  # a connection timed out or refused is unsaid


def _scraped(port: int) -> tuple[int, list[tuple[str, str]], str] | None:
    """A scrape, or None when it was answered busy (or reset: its request sent before the busy
    answer's close)."""
    try:
        answer = scrape(port)
    except (ConnectionResetError, http.client.RemoteDisconnected):
        return None
    return None if answer[0] == 503 else answer


def test_listen_serves_each_connection_s_session(tmp_path: Path) -> None:
    port = closed_port()
    address = tmp_path / "t.sock"
    server = subprocess.Popen([TRANSLATOR, "--listen", f"unix:{address}"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=prometheus_env(port))
    try:
        sessions = sessions_over(address, FIXTURE.read_bytes())
        poll(lambda: len(read(served(port))["samples"]["claude_code_session_count_total"]) == 2)
        text = scrape(port)[2]
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=20)
    assert err == b""
    check(text)
    assert {labels["session_id"] for labels, _ in read(text)["samples"]["claude_code_session_count_total"]} == set(
        sessions)


async def test_caliban_claude_serves_its_live_session(tmp_path: Path) -> None:
    port = closed_port()
    env = caliban_env(tmp_path) | prometheus_env(port)
    (tmp_path / "work").mkdir()
    async with ClaudeSDKClient(ClaudeAgentOptions(cli_path=SHIM, env=env, cwd=str(tmp_path / "work"))) as client:
        await client.query("how many files are here?")
        result = [m async for m in client.receive_response()][-1]
        assert isinstance(result, ResultMessage)
        poll(lambda: "claude_code_active_time_total" in served(port))  # the session still open
        text = scrape(port)[2]
    check(text)
    assert tokens(text) == HEADLESS
    assert {labels["session_id"] for labels, _ in read(text)["samples"]["claude_code_cost_usage_total"]} == {
        result.session_id}
    cost = sum(v for _, v in read(text)["samples"]["claude_code_cost_usage_total"])
    assert cost == pytest.approx(result.total_cost_usd)


def test_a_one_shot_replay_says_its_endpoint_would_show_nothing() -> None:
    port = closed_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}
    sid = ["--session-id", "4f1c2d9e-0000-4000-8000-000000000004"]
    plain = subprocess.run([TRANSLATOR, *sid, str(FIXTURE)], env=base, capture_output=True, timeout=60)
    done = subprocess.run([TRANSLATOR, *sid, str(FIXTURE)], env=prometheus_env(port), capture_output=True, timeout=60)
    assert done.returncode == plain.returncode == 0
    mask = [{k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")}
            for line in done.stdout.splitlines()]
    assert mask == [{k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")}
                    for line in plain.stdout.splitlines()]
    assert done.stderr.decode().splitlines() == [
        "translator: telemetry: OTEL_METRICS_EXPORTER=prometheus: a scrape endpoint of a process that exits at once "
        "shows nothing; metrics not exported (export them with otlp to a collector)"]
