"""What a user may write in the OTEL_* variables that cannot be done: a misspelled exporter or
protocol, a value the SDK would choke on (a batch of 0, a queue of -1, an interval past what a
timer holds, a malformed OTEL_RESOURCE_ATTRIBUTES, a certificate that is not there). Each is one
stderr line naming it, always (also when no other signal is left), that signal off or the value
left out, and stdout and the exit status those of a run with telemetry off; no SDK warning and
no thread's traceback reaches stderr. Run as the installed command, against a loopback receiver."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from support_otlp import by_name, receiver, telemetry_env, token_sums
from support_processes import TRANSLATOR, Follower, append, fixture, peak_rss_kb

FIXTURE = fixture("tool_use_two_turns")
SID = "4f1c2d9e-0000-4000-8000-000000000003"
TWO_TURNS = {"input": 64, "output": 57, "cacheRead": 5144, "cacheCreation": 1168}


def translate(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([TRANSLATOR, "--session-id", SID, FIXTURE], env=env, capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def masked(stdout: bytes) -> list[dict[str, object]]:
    return [{k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")}
            for line in stdout.splitlines()]


@pytest.fixture(scope="module")
def plain() -> list[dict[str, object]]:
    done = translate({k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))})
    assert done.returncode == 0
    return masked(done.stdout)


# each: the variables, the one line said, and what still reaches the collector
CASES = {
    "grpc misspelled, nothing left": (
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grcp", "OTEL_TRACES_EXPORTER": "none"},
        ["OTEL_EXPORTER_OTLP_PROTOCOL=grcp is not supported (grpc, http/protobuf, http/json); metrics, logs not "
         "exported"], set()),
    "an exporter misspelled": (
        {"OTEL_METRICS_EXPORTER": "promethus"},
        ["OTEL_METRICS_EXPORTER=promethus is not supported (otlp, prometheus, console, none)"], {"logs", "traces"}),
    "a batch of 0": (
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"},
        ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE=0 is not within 1..65536; traces not exported"], {"metrics", "logs"}),
    "a queue of -1": (
        {"OTEL_BLRP_MAX_QUEUE_SIZE": "-1"},
        ["OTEL_BLRP_MAX_QUEUE_SIZE=-1 is not within 1..65536; logs not exported"], {"metrics", "traces"}),
    "an interval past time_t": (
        {"OTEL_METRIC_EXPORT_INTERVAL": "99999999999999999999"},
        ["OTEL_METRIC_EXPORT_INTERVAL=99999999999999999999 is past the longest interval a timer holds "
         "(2147483647 ms); metrics not exported"], {"logs", "traces"}),
    "malformed resource attributes": (
        {"OTEL_RESOURCE_ATTRIBUTES": "team=a,oops,x=1"},
        ["OTEL_RESOURCE_ATTRIBUTES has 'oops', not key=value; its attributes not used"], {"metrics", "logs", "traces"}),
    "a certificate that is not there": (
        {"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": "/nonexistent/ca.pem"},
        ["OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE=/nonexistent/ca.pem cannot be read; logs not exported"],
        {"metrics", "traces"}),
    "a header that is no name=value (its text, often a token, not said)": (
        {"OTEL_EXPORTER_OTLP_HEADERS": "X-Team=a,Bearer sk-secret-1"},
        ["OTEL_EXPORTER_OTLP_HEADERS's entry 2 is not name=value; left out"], {"metrics", "logs", "traces"}),
    "an unknown compression": (
        {"OTEL_EXPORTER_OTLP_COMPRESSION": "brotli"},
        ["OTEL_EXPORTER_OTLP_COMPRESSION=brotli is not supported (gzip, none); not compressed"],
        {"metrics", "logs", "traces"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_value_that_cannot_be_used_is_one_line_naming_it(case: str, plain: list[dict[str, object]]) -> None:
    env, said, delivered = CASES[case]
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/protobuf", **env))
    assert done.returncode == 0 and masked(done.stdout) == plain
    assert done.stderr.decode().splitlines() == [f"translator: telemetry: {line}" for line in said]
    assert {name for name, items in (("metrics", got.metrics), ("logs", got.logs), ("traces", got.spans))
            if items} == delivered
    if "metrics" in delivered:
        assert token_sums(got.metrics) == TWO_TURNS


def test_the_resource_attributes_and_service_name_are_used() -> None:
    with receiver() as (got, endpoint):
        done = translate(telemetry_env(endpoint, "http/protobuf", OTEL_RESOURCE_ATTRIBUTES="team=a%20b,x=1",
                                       OTEL_SERVICE_NAME="caliban"))
    assert (done.returncode, done.stderr) == (0, b"")
    assert {(p["resource"]["team"], p["resource"]["x"], p["resource"]["service.name"]) for p in got.metrics} == {
        ("a b", "1", "caliban")}


def test_the_timeout_is_milliseconds_as_in_claude_code() -> None:
    """OTEL_EXPORTER_OTLP_TIMEOUT=500 is half a second (the SDK's Python exporters would wait
    500 s on a collector that never answers, and the exit its whole bound)."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as hole:  # accepts, never answers
        began = time.monotonic()
        done = translate(telemetry_env(f"http://127.0.0.1:{hole.getsockname()[1]}", "http/protobuf",
                                       OTEL_EXPORTER_OTLP_TIMEOUT="500"))
        took = time.monotonic() - began
    assert done.returncode == 0
    assert took < 3.5, took  # not the 4 s exit bound: each export gave up after 0.5 s


def test_a_follower_with_a_queue_that_cannot_be_keeps_no_backlog(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower whose logs cannot be exported (OTEL_BLRP_MAX_QUEUE_SIZE=-1): one line, the other
    signals exported, and its memory that of a follower with telemetry on, not a kept backlog."""
    log = tmp_path / "agent.ndjson"
    runs = Path(FIXTURE).read_bytes() * 400
    with receiver() as (got, endpoint):
        for key, value in telemetry_env(endpoint, "http/protobuf", OTEL_BLRP_MAX_QUEUE_SIZE="-1",
                                        OTEL_METRIC_EXPORT_INTERVAL="200").items():
            monkeypatch.setenv(key, value)
        follower = Follower(log)
        try:
            append(log, runs)
            results = 0
            while results < 400:
                results += sum(f["type"] == "result" for f in follower.read_frames(1, timeout=60))
            rss = peak_rss_kb(follower.proc.pid)
            assert got.wait(lambda r: bool(by_name(r.spans, "name").get("claude_code.interaction")))
        finally:
            _, _, err = follower.stop()
    assert err.decode().splitlines() == [
        "translator: telemetry: OTEL_BLRP_MAX_QUEUE_SIZE=-1 is not within 1..65536; logs not exported"]
    assert not got.logs
    assert rss < 200_000, rss  # KiB


def test_one_reading_of_key_value_lists_serves_headers_and_resource_attributes() -> None:
    """Split on `,` then on the first `=`, both sides trimmed, empty entries skipped; a bad entry
    keeps its position (a header is named by it, its text never said) and its text (a resource
    attribute is named by it)."""
    from translator.telemetry.otlp import headers, pairs

    assert list(pairs(" a = b=c ,, =x ,k,Authorization=Bearer t%201")) == [
        (1, "a = b=c", ("a", "b=c")), (2, "=x", None), (3, "k", None),
        (4, "Authorization=Bearer t%201", ("Authorization", "Bearer t%201"))]
    notes: list[str] = []
    assert headers("X-Team=a,Bearer sk-secret-1,Y=%41", notes, "H") == (("X-Team", "a"), ("Y", "%41"))
    assert notes == ["H's entry 2 is not name=value; left out"]
