"""The console exporters where the CLI 2.1.333 prints them (set-t5's otel-console): beside text
output only (caliban-claude -p; the CLI mixes them into stdout, here they go to stderr so that
stdout stays the answer), never beside json or stream-json, which the translator always writes:
there, one line says so and stdout is what it is with telemetry off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
from support_otlp import PROMPT, SHIM, caliban_env
from support_processes import TRANSLATOR, fixture

CONSOLE = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_METRICS_EXPORTER": "console", "OTEL_LOGS_EXPORTER": "console",
           "OTEL_METRIC_EXPORT_INTERVAL": "1000", "OTEL_LOGS_EXPORT_INTERVAL": "1000"}
SAID = ("translator: telemetry: console: Claude Code prints it only beside text output, never beside json or "
        "stream-json (here stdout is data); metrics, logs not exported")


def base() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAUDE_CODE_"))}


def masked(stdout: bytes) -> list[dict[str, object]]:
    return [{k: v for k, v in orjson.loads(line).items() if k not in ("uuid", "timestamp")}
            for line in stdout.splitlines()]


def test_the_translator_s_stream_json_gets_no_console_and_one_line() -> None:
    args = [TRANSLATOR, "--session-id", "4f1c2d9e-0000-4000-8000-000000000005", fixture("tool_use_two_turns")]
    plain = subprocess.run(args, env=base(), capture_output=True, timeout=60)
    done = subprocess.run(args, env=base() | CONSOLE, capture_output=True, timeout=60)
    assert done.returncode == plain.returncode == 0
    assert masked(done.stdout) == masked(plain.stdout)
    assert done.stderr.decode().splitlines() == [SAID]


def shim(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([SHIM, "-p", PROMPT, *args], env=base() | caliban_env(tmp_path) | CONSOLE,
                          capture_output=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_caliban_claude_text_output_prints_the_console_on_stderr(tmp_path: Path) -> None:
    done = shim(tmp_path)
    assert (done.returncode, done.stdout) == (0, b"There are 3 files.\n")
    err = done.stderr.decode()
    for name in ("claude_code.token.usage", "claude_code.cost.usage", "claude_code.api_request",
                 "claude_code.tool_result"):
        assert name in err, name


def test_caliban_claude_stream_json_gets_no_console(tmp_path: Path) -> None:
    done = shim(tmp_path, "--output-format", "stream-json", "--verbose")
    assert done.returncode == 0
    assert [f["type"] for f in map(orjson.loads, done.stdout.splitlines())][-1] == "result"
    assert done.stderr.decode().splitlines() == [SAID]
