"""Usage per API call, as the readers count it: an SDK app on caliban-claude, on both backends,
then the readers of what it left, each at a pinned version: ccusage's daily, monthly, session and
blocks reports, llm-usage-metrics and claude-monitor on the session files, OpenInference's Agent
SDK instrumentation on the frames. Each counts every API call once and sums to the result frames'
usage (and, where it takes the file's cost, their total_cost_usd). On `caliban -p`, which reports
usage once per run, the split across calls is an estimate (docs/shim.md): the totals still agree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
from support_fixtures import npm_installed
from support_sdk_sessions import BACKENDS, COUNTERS, Session

from translator.shim.backends.drive.backend import USAGE_UNSHOWN

ESTIMATE = "caliban -p: the run's totals split evenly across its API calls"

# On the drive backend a call that runs tools has its frames out before caliban reports its usage
# (at its TurnEnd, once the tools have run): the frames show the last call's usage only (docs/shim.md)
LAST_DRIVE_CALL = {"input_tokens": 400, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1100, "output_tokens": 35}

LLM_USAGE_VERSION = "0.8.0"
LLM_USAGE_CACHE = Path(os.environ.get("CALIBAN_CLAUDE_LLM_USAGE_CACHE") or Path.home() / ".cache" / "caliban-claude-llm-usage")


@pytest.fixture(params=sorted(BACKENDS))
async def session(request: pytest.FixtureRequest, tmp_path: Path) -> Session:
    made = await BACKENDS[request.param](tmp_path)
    assert [r.is_error for r in made.results] == [False] * len(made.results)
    return made


def assistant_lines(config: Path) -> list[dict[str, Any]]:
    return [line for path in sorted(config.rglob("*.jsonl")) for line in map(json.loads, path.read_text().splitlines())
            if line.get("type") == "assistant"]  # fmt: skip


async def test_every_api_call_has_its_own_id_and_usage_in_frames_and_files(session: Session) -> None:
    frames = [m for run in session.frames for m in run if isinstance(m, claude_agent_sdk.AssistantMessage)]
    assert all(m.message_id for m in frames) and session.calls() == (3 if len(session.frames) == 2 else 2)
    last: dict[str, dict[str, int]] = {}  # each message's latest usage, as the SDK's readers keep it
    for m in frames:
        last[m.message_id or ""] = m.usage or {}
    shown = {k: sum(u.get(k, 0) for u in last.values()) for k in COUNTERS}
    assert shown == (session.usage() if len(session.frames) == 2 else LAST_DRIVE_CALL)
    unshown = [line for line in session.said if "carry none" in line]  # (the drive's: said, once)
    assert unshown == ([] if len(session.frames) == 2 else [f"caliban-claude: warning: {USAGE_UNSHOWN}"])
    lines = assistant_lines(session.config)
    per_call = {line["message"]["id"]: line for line in lines}
    assert len(per_call) == session.calls()
    assert all(any(line["message"]["usage"][k] for k in COUNTERS) for line in lines)  # no zero rows
    assert {k: sum(line["message"]["usage"][k] for line in per_call.values()) for k in COUNTERS} == session.usage()
    assert sum(line["costUSD"] for line in per_call.values()) == pytest.approx(session.cost())
    estimated = {line.get("usageEstimate") for line in lines}
    assert estimated == ({ESTIMATE} if len(session.frames) == 2 else {None})


@pytest.mark.parametrize("report", ["daily", "monthly", "session", "blocks"])
async def test_ccusage_reports_count_the_result_frames_usage_and_cost(session: Session, ccusage: Any, report: str) -> None:
    got = ccusage(session.config, report)
    if report == "blocks":
        blocks = [b for b in got["blocks"] if not b["isGap"]]
        counts = {k: sum(b["tokenCounts"][k] for b in blocks) for k in
                  ("inputTokens", "cacheCreationInputTokens", "cacheReadInputTokens", "outputTokens")}  # fmt: skip
        assert list(counts.values()) == [session.usage()[k] for k in COUNTERS]
        assert sum(b["entries"] for b in blocks) == session.calls()
        assert sum(b["costUSD"] for b in blocks) == pytest.approx(session.cost())
        return
    totals = got["totals"]
    assert [totals[k] for k in ("inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens")] == \
        [session.usage()[k] for k in COUNTERS]  # fmt: skip
    assert totals["totalCost"] == pytest.approx(session.cost())  # the lines' costUSD, taken over its own prices


@pytest.fixture(scope="session")
def llm_usage() -> Callable[[Path, Path], dict[str, Any]]:
    """`llm-usage session --json` (npm llm-usage-metrics, pinned) on a projects dir, its state in `home`."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the llm-usage tests were SKIPPED: node and npm are not installed (.ci/run installs them)")
    entry = npm_installed(LLM_USAGE_CACHE, {"llm-usage-metrics": LLM_USAGE_VERSION}) / "llm-usage-metrics" / "dist" / "index.js"

    def report(projects: Path, home: Path) -> dict[str, Any]:
        env = {**os.environ, "HOME": str(home), "TZ": "UTC"}
        done = subprocess.run(["node", str(entry), "session", "--source", "claude", "--claude-dir", str(projects), "--json",
                               "--pricing-offline"], env=env, capture_output=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert b"skipped" not in done.stderr.lower(), done.stderr  # no row of ours taken as malformed
        return dict(json.loads(done.stdout))

    return report


async def test_llm_usage_counts_every_api_call_once(session: Session, llm_usage: Any, tmp_path: Path) -> None:
    (home := tmp_path / "home").mkdir()
    rows = llm_usage(session.config / "projects", home)["data"]
    assert sum(r["eventCount"] for r in rows) == session.calls()
    got = {k: sum(r[k] for r in rows) for k in ("inputTokens", "cacheWriteTokens", "cacheReadTokens", "outputTokens")}
    assert list(got.values()) == [session.usage()[k] for k in COUNTERS]


async def test_claude_monitor_counts_every_api_call_once(session: Session) -> None:
    from claude_monitor.core.models import CostMode
    from claude_monitor.data.reader import load_usage_entries

    entries, _ = load_usage_entries(data_path=session.config / "projects", mode=CostMode.AUTO)
    assert len(entries) == session.calls()
    got = [sum(getattr(e, k) for e in entries) for k in ("input_tokens", "cache_creation_tokens", "cache_read_tokens",
                                                          "output_tokens")]  # fmt: skip
    assert got == [session.usage()[k] for k in COUNTERS]


async def test_openinference_counts_the_result_frames_tokens(tmp_path: Path) -> None:
    """OpenInference's spans (it sums each message's usage from the frames, for Claude Code
    2.1.277 and later): prompt tokens are input plus both cache counters, on both backends."""
    from openinference.instrumentation.claude_agent_sdk import ClaudeAgentSDKInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = ClaudeAgentSDKInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for name, backend in sorted(BACKENDS.items()):
            (tmp_path / name).mkdir()
            made = await backend(tmp_path / name)
            spans = [s for s in exporter.get_finished_spans() if "llm.token_count.prompt" in (s.attributes or {})]
            exporter.clear()
            assert len(spans) == len(made.results), name
            for span, result in zip(spans, made.results, strict=True):
                usage, attributes = result.usage or {}, dict(span.attributes or {})
                usage = usage if name == "print" else LAST_DRIVE_CALL  # (the frames' usage: see LAST_DRIVE_CALL)
                prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
                assert (attributes["llm.token_count.prompt"], attributes["llm.token_count.completion"]) == (
                    prompt, usage["output_tokens"]), name  # fmt: skip
                assert attributes["llm.token_count.prompt_details.cache_read"] == usage["cache_read_input_tokens"], name
    finally:
        instrumentor.uninstrument()
