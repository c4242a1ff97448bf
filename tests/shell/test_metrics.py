"""--metrics: the installed command in pipe, follow and service modes, scraped over HTTP and
parsed with prometheus_client's own parser; every value is checked against what was sent."""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support_fixtures import FIXTURES, STAGE_A, Reap, events, frames_of, lines_of, recoveries, run_end, turn
from support_processes import Follower, Live, Server, append, exchange, health, poll, port_of, read_all, run

from translator import __version__

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
BAD = b'not json\n\xff\n[1]\n{"type":"TurnStart","turn_index":"zero"}\n'
BAD_KINDS = {"invalid_json": 1, "invalid_utf8": 1, "not_an_event": 1, "malformed_event": 1}
METRICS = ("--metrics", "tcp:127.0.0.1:0")


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def settled(port: int, name: str, expected: float, **labels: str) -> Samples:
    """A scrape in which `name` has reached `expected`."""
    def reached() -> Samples | None:
        samples = scrape(port)
        return samples if value(samples, name, **labels) == expected else None

    return poll(reached)  # type: ignore[no-any-return]


def totals(frames: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, float], dict[str, int]]:
    """Runs by subtype, cost by model and tokens by kind, as the result frames tell them."""
    runs: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for f in frames:
        if f["type"] == "result":
            runs[f["subtype"]] = runs.get(f["subtype"], 0) + 1
            for key, n in f["usage"].items():
                kind = key.removesuffix("_tokens").removesuffix("_input")
                tokens[kind] = tokens.get(kind, 0) + n
    models = {f["model"] for f in frames if f.get("subtype") == "init"}
    cost = {model: sum(f["total_cost_usd"] for f in frames if f["type"] == "result") for model in models}
    return runs, cost, tokens


def check_totals(samples: Samples, frames: list[dict[str, Any]]) -> None:
    runs, cost, tokens = totals(frames)
    for subtype in ("success", "error", "max_turns", "cancelled"):
        assert value(samples, "translator_runs_closed_total", subtype=subtype) == runs.get(subtype, 0)
    for model, usd in cost.items():
        assert value(samples, "translator_cost_usd_total", model=model) == pytest.approx(usd, abs=1e-9)
    for kind in ("input", "output", "cache_read", "cache_creation"):
        assert value(samples, "translator_tokens_total", kind=kind) == tokens.get(kind, 0)
    assert value(samples, "translator_frames_written_total") == len(frames)


def test_pipe_mode_counts_lines_bytes_bad_lines_runs_tokens_cost_and_frames() -> None:
    live = Live(*METRICS)
    port = port_of(live.proc)
    open_run = b"\n".join(lines_of("max_turns")[:3]) + b"\n"
    # A retried turn (the Stage-A sample, on the model of the others so that cost sums by one):
    # a recovery, said but not a bad line.
    retried = STAGE_A.read_bytes().replace(b"sonnet-4-6", b"sonnet-4-5")
    sent = BAD + events("tool_use_two_turns") + retried + events("max_turns") + open_run
    live.send(sent)
    samples = settled(port, "translator_open_runs", 1)
    samples = settled(port, "translator_input_lines_total", sent.count(b"\n"))
    assert value(samples, "translator_input_bytes_total") == len(sent)
    for kind in ("invalid_json", "invalid_utf8", "not_an_event", "malformed_event", "too_long", "untranslatable"):
        assert value(samples, "translator_bad_lines_total", reason=kind) == BAD_KINDS.get(kind, 0)
    assert sum(v for (name, _), v in samples.items() if name == "translator_bad_lines_total") == len(BAD_KINDS)
    frames = live.read_frames(int(value(samples, "translator_frames_written_total")))
    assert not select.select([live.proc.stdout], [], [], 0.2)[0]  # and nothing more was written
    assert [f["subtype"] for f in frames if f["type"] == "result"] == ["success", "success", "max_turns"]
    check_totals(samples, frames)
    assert value(samples, "translator_build_info", version=__version__, mode="pipe",
                 python=samples_python(samples)) == 1
    assert health(port) == (200, "ok\n")
    assert ("translator_follow_lag_bytes", ()) not in samples  # only where it applies
    assert live.proc.stdin is not None
    live.proc.stdin.close()
    assert live.proc.wait(timeout=20) == 0


def samples_python(samples: Samples) -> str:
    ((_, labels),) = [key for key in samples if key[0] == "translator_build_info"]
    return dict(labels)["python"]


def test_follow_mode_lag_restarts_and_health_when_the_directory_goes(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "stdout.ndjson"
    first = BAD + events("tool_use_two_turns")
    log.write_bytes(first)
    follower = Follower(log, *METRICS)
    port = port_of(follower.proc)
    frames = follower.read_frames(6)
    samples = settled(port, "translator_input_lines_total", first.count(b"\n"))
    assert value(samples, "translator_input_bytes_total") == len(first)
    assert value(samples, "translator_follow_lag_bytes") == 0
    assert 0 <= value(samples, "translator_follow_lag_seconds") < 60
    assert sum(value(samples, "translator_bad_lines_total", reason=k) for k in BAD_KINDS) == 4
    check_totals(samples, frames)
    assert health(port) == (200, "ok\n")

    log.write_bytes(events("thinking"))  # truncated and rewritten
    frames += follower.read_frames(3)
    samples = settled(port, "translator_follow_restarts_total", 1, cause="truncated")
    fresh = logs / "next.ndjson"
    fresh.write_bytes(events("max_turns"))
    os.replace(fresh, log)  # replaced
    frames += follower.read_frames(5)
    samples = settled(port, "translator_follow_restarts_total", 1, cause="replaced")
    samples = settled(port, "translator_input_lines_total", (first + events("thinking") + events("max_turns")).count(b"\n"))
    assert value(samples, "translator_follow_restarts_total", cause="truncated") == 1
    check_totals(samples, frames)

    append(log, b"\n".join(lines_of("thinking")[:2]) + b"\n")  # a run in flight
    settled(port, "translator_open_runs", 1)
    gone = tmp_path / "gone"
    logs.rename(gone)  # the volume vanished
    status, body = poll(lambda: (h := health(port))[0] == 503 and h)
    assert body == f"unhealthy: {logs}: the followed file's directory is missing or unreadable\n"
    gone.rename(logs)
    assert poll(lambda: health(port)[0] == 200)
    status, rest, err = follower.stop()
    assert status == 143 and [f["subtype"] for f in frames_of(rest)] == ["cancelled"]
    assert [line.split(b":")[2] for line in err.splitlines()] == [b"1", b"2", b"3", b"4"]  # the bad lines only


def test_follow_from_the_end_counts_what_it_skipped_as_read(tmp_path: Path) -> None:
    log = tmp_path / "stdout.ndjson"
    log.write_bytes(events("thinking"))
    follower = Follower(log, "--from-end", *METRICS)
    port = port_of(follower.proc)
    samples = settled(port, "translator_follow_lag_bytes", 0)
    assert value(samples, "translator_input_bytes_total") == 0
    follower.stop()


def test_service_mode_connections_accepted_timed_out_and_active(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        service_port = probe.getsockname()[1]
    server = Server(f"tcp:127.0.0.1:{service_port}", *METRICS, "--idle-timeout", "2", "--grace", "30")
    port = port_of(server.proc)
    # the Server helper connected once to see the service up: an empty stream, no run
    settled(port, "translator_connections_active", 0)
    out = exchange(server.connect(), events("tool_use_two_turns"))
    out += exchange(server.connect(), BAD + events("thinking"))
    quiet = server.connect()
    quiet.sendall(b"\n".join(lines_of("max_turns")[:3]) + b"\n")
    samples = settled(port, "translator_open_runs", 1)
    assert value(samples, "translator_connections_active") == 1
    out += read_all(quiet)  # the idle timeout closes it, its run ended as input that stopped
    samples = settled(port, "translator_connections_timed_out_total", 1)
    sent = events("tool_use_two_turns") + BAD + events("thinking") + b"\n".join(lines_of("max_turns")[:3]) + b"\n"
    assert value(samples, "translator_connections_accepted_total") == 4
    assert value(samples, "translator_connections_active") == 0
    assert value(samples, "translator_connections_limit") == 64
    assert value(samples, "translator_open_runs") == 0
    assert value(samples, "translator_input_lines_total") == sent.count(b"\n")
    assert value(samples, "translator_input_bytes_total") == len(sent)
    assert sum(value(samples, "translator_bad_lines_total", reason=k) for k in BAD_KINDS) == 4
    frames = frames_of(out)
    assert [f["subtype"] for f in frames if f["type"] == "result"] == ["success", "success", "error"]
    check_totals(samples, frames)
    assert health(port) == (200, "ok\n")

    held = server.connect()  # open while the service is told to stop: health says so at once
    held.sendall(lines_of("thinking")[0] + b"\n")
    settled(port, "translator_connections_active", 1)
    server.proc.send_signal(signal.SIGTERM)
    assert poll(lambda: health(port) == (503, "unhealthy: stopping\n"))
    held.shutdown(socket.SHUT_WR)
    read_all(held)
    assert server.proc.wait(timeout=20) == 143


def test_recoveries_are_counted_by_kind_and_headless_cost_is_the_agents(tmp_path: Path) -> None:
    """Each recovery move the fold says on stderr is counted under its kind: a lost `RunEnd` in
    either dialect, a retried turn, a stream cut off inside a run (a client gone mid-run). A
    headless run's cost is the agent's own figure, as its result frame says."""
    server = Server(f"unix:{tmp_path / 'sock'}", *METRICS)
    port = port_of(server.proc)
    samples = scrape(port)
    assert {kind: value(samples, "translator_recoveries_total", kind=kind)
            for kind in ("lost_run_end", "retried_turn", "truncated")} == dict.fromkeys(
                ("lost_run_end", "retried_turn", "truncated"), 0)
    lost = turn(0, "first") + turn(0, "second") + run_end(turns=1)  # turn 0 again: a RunEnd lost
    retried_then_cut, said = recoveries()
    assert [kind for _, kind in said] == ["retried_turn", "truncated"]
    headless = (FIXTURES / "headless" / "tool_use_two_turns.jsonl").read_bytes().splitlines(keepends=True)
    result_lost = b"".join(ln for ln in headless if b'"type":"result"' not in ln)  # then a new init
    result_lost += (FIXTURES / "headless" / "thinking.jsonl").read_bytes()
    out = b"".join(exchange(server.connect(), data) for data in (lost, retried_then_cut, result_lost))
    samples = settled(port, "translator_recoveries_total", 1, kind="truncated")
    assert value(samples, "translator_recoveries_total", kind="lost_run_end") == 2
    assert value(samples, "translator_recoveries_total", kind="retried_turn") == 1
    assert value(samples, "translator_bad_lines_total", reason="invalid_json") == 0  # said, not bad lines
    frames = frames_of(out)
    results = [f for f in frames if f["type"] == "result"]
    assert [f["subtype"] for f in results] == ["error", "success", "success", "error", "error", "success"]
    agents = results[-1]["total_cost_usd"]  # the agent's figure, passed as it came
    assert agents > 0
    cost = sum(v for (name, _), v in samples.items() if name == "translator_cost_usd_total")
    assert cost == pytest.approx(sum(f["total_cost_usd"] for f in results), abs=1e-9)
    server.stop()


def test_an_address_that_cannot_be_served_is_one_line_and_74() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = run("--metrics", f"tcp:127.0.0.1:{taken.getsockname()[1]}", stdin=b"")
    assert proc.returncode == 74
    assert proc.stderr.decode().startswith("translator: --metrics tcp:127.0.0.1:") and proc.stderr.count(b"\n") == 1
    proc = run("--metrics", "localhost:9464", stdin=b"")
    assert proc.returncode == 64 and b"expected tcp:[HOST:]PORT" in proc.stderr
    proc = run("--metrics", "tcp:9464", "--out-dir", "/nonexistent", "fixtures")
    assert proc.returncode == 64 and proc.stderr == b"translator: --metrics: does not go with --out-dir\n"


def test_without_metrics_prometheus_client_is_not_imported() -> None:
    code = "import sys, translator.cli.command as c; c.main(['/dev/null']); print('prometheus_client' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert proc.stdout == b"False\n"


def test_only_metrics_and_healthz_are_served(reap: Reap) -> None:
    """Any other path is 404 (it was the metrics, 200: a typo'd probe looked healthy)."""
    live = Live(*METRICS)
    reap(live.proc)
    port = port_of(live.proc)

    def status(path: str, method: str = "GET") -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    assert status("/metrics")[0] == 200 and b"translator_input_lines_total" in status("/metrics")[1]
    assert status("/healthz") == (200, b"ok\n")
    for path in ("/", "/metric", "/metrics/", "/healthz/x", "/favicon.ico", "/../etc/passwd"):
        assert status(path) == (404, b"not found: /metrics and /healthz are served\n"), path
    assert status("/metrics?name[]=translator_input_lines_total")[0] == 200  # a query is the metrics' own
    live.proc.send_signal(signal.SIGTERM)
    assert live.finish()[0] == 143


def test_a_quiet_scrape_connection_is_closed_and_a_burst_of_200_is_queued(reap: Reap) -> None:
    """A connection that sends nothing holds a server thread: it is closed after its timeout
    (it was held for ever). While the command is stopped (SIGSTOP), 200 scrapers connect at
    once: the listen backlog takes them all (it was 5: the rest waited on SYN retries, and
    timed out), and each gets its metrics once the command runs again."""
    from translator.scrape_server import CONNECTION_TIMEOUT_S

    live = Live(*METRICS)
    reap(live.proc)
    port = port_of(live.proc)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as idle:
        idle.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
        began = time.monotonic()
        assert idle.recv(4096) == b""  # closed by the server
        assert time.monotonic() - began < CONNECTION_TIMEOUT_S + 10

    os.kill(live.proc.pid, signal.SIGSTOP)
    try:
        burst = [socket.socket() for _ in range(200)]
        for sock in burst:
            sock.setblocking(False)
            assert sock.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS)
        deadline = time.monotonic() + 5
        pending = set(burst)
        while pending and time.monotonic() < deadline:  # the handshake is the kernel's: no need to run
            _, writable, _ = select.select([], list(pending), [], 0.5)
            pending -= {s for s in writable if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0}
        assert not pending, f"{len(pending)} of 200 connections not taken while the command was stopped"
    finally:
        os.kill(live.proc.pid, signal.SIGCONT)
    for sock in burst:
        sock.setblocking(True)
        sock.settimeout(30)
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    for sock in burst:
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.0 200 OK") and b"translator_input_lines_total" in answer
    live.proc.send_signal(signal.SIGTERM)
    assert live.finish()[::2] == (143, b"")  # a connection timed out is unsaid (it was a traceback)


def test_connections_over_the_cap_are_answered_503_at_once_and_given_no_thread(reap: Reap) -> None:
    """Each connection had a thread of its own, without a bound: a client holding thousands
    exhausted the process's threads and memory, and the translation with them. MAX_SCRAPES are
    served at once; the next are answered 503 at once and closed, given no thread, and a slot
    freed serves the next scrape."""
    from translator.scrape_server import BUSY, MAX_SCRAPES

    live = Live(*METRICS)
    reap(live.proc)
    port = port_of(live.proc)

    def threads() -> int:
        with open(f"/proc/{live.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("Threads:")).split()[1])

    def hold() -> None:  # a byte more of a request line each: the held connections never go quiet
        for sock in held:
            sock.sendall(b"G")

    base = threads()  # (the main thread and the server's: no scrape's yet)
    held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(MAX_SCRAPES)]
    try:
        hold()
        poll(lambda: threads() == base + MAX_SCRAPES)  # each served on a thread of its own
        over = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(300)]
        hold()
        began = time.monotonic()
        for sock in over:
            with sock:
                assert read_all(sock) == BUSY
        assert time.monotonic() - began < 3  # at once, not after a wait or the quiet timeout
        assert BUSY.startswith(b"HTTP/1.0 503 Service Unavailable\r\n") and b"\r\nRetry-After: 1\r\n" in BUSY
        assert threads() == base + MAX_SCRAPES
        held.pop().close()  # a slot freed: the next scrape is served
        hold()
        samples = poll(lambda: _served(port))
        assert value(samples, "translator_input_lines_total") == 0
    finally:
        for sock in held:
            sock.close()
    poll(lambda: threads() == base)
    assert scrape(port)
    live.proc.send_signal(signal.SIGTERM)
    assert live.finish()[::2] == (143, b"")


def _served(port: int) -> Samples | None:
    """A scrape's samples, or None when it was answered busy (or reset: its request sent before
    the busy answer's close)."""
    try:
        return scrape(port)
    except urllib.error.HTTPError as exc:
        assert exc.code == 503
    except (ConnectionResetError, urllib.error.URLError):
        pass
    return None
