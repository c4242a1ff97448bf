"""Shared helpers: fixtures on disk, a direct drive of the sans-I/O core, what its output holds, and
the repository as a fresh clone has it. The command as a process is in support_processes.py."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.diagnostics import Diagnostic, Notice
from translator.encoders.enriched import EnrichedEncoder

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"  # these helpers, the fake caliban, the SDK drivers (ts_sdk/)
FIXTURES = ROOT / "fixtures"
EXPECTED = FIXTURES / "expected"
SCENARIOS = sorted(p.name.removesuffix(".events.jsonl") for p in FIXTURES.glob("*.events.jsonl"))
SESSION = "SESSION"
DAY = 1764460800  # 2025-11-30: when host()'s logs were last modified
RUN = (FIXTURES / "tool_use_two_turns.events.jsonl").read_bytes()  # one run


def host(root: Path, logs: int, runs: int = 2, day: int = DAY) -> Path:
    """`logs` sessions named as every host names them: run-N/stdout.ndjson, of `runs` runs each,
    last modified on `day` (a results table's date partition)."""
    for n in range(logs):
        path = root / f"run-{n}" / "stdout.ndjson"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(RUN * runs)
        os.utime(path, (day, day))
    return root


def fleet(root: Path, files: int) -> Path:
    """`files` small sessions of varied sizes, one folder each, as a fleet keeps them."""
    sources = sorted(FIXTURES.glob("*.events.jsonl"))
    for n in range(files):
        (root / f"h{n % 7}" / f"s{n}").mkdir(parents=True)
        shutil.copy(sources[n % len(sources)], root / f"h{n % 7}" / f"s{n}" / "stdout.ndjson")
    return root


def events(name: str) -> bytes:
    return (FIXTURES / f"{name}.events.jsonl").read_bytes()


def lines_of(name: str) -> list[bytes]:
    return events(name).splitlines()


def frames_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines()]


def results(data: bytes) -> list[dict[str, Any]]:
    return [f for f in frames_of(data) if f["type"] == "result"]


# What differs between two translations of one input made at different moments.
VOLATILE = ("duration_ms", "duration_api_ms", "duration_source")


def without_timing(data: bytes) -> list[dict]:
    return [{k: v for k, v in f.items() if k not in VOLATILE} for f in frames_of(data)]


def expected(name: str) -> list[dict]:
    return without_timing((EXPECTED / f"{name}.enriched.jsonl").read_bytes())


def reported(diagnostics: list[str]) -> list[tuple[int, str]]:
    """Each diagnostic as (line, kind): a bad line's kind (diagnostics.KINDS) or a recovery's
    (core/states.py); a message about no line (a model without a rate) as (0, its text)."""
    return [(d.line, d.kind) if isinstance(d, (Diagnostic, Notice)) else (0, d) for d in diagnostics]


# The agent's Stage-A max_tokens retry, a byte-exact sample: its turn 0 sent again at line 4.
STAGE_A = FIXTURES / "samples" / "raw-derived-from-code" / "stage_a_max_tokens_retry.ndjson"


def recoveries() -> tuple[bytes, list[tuple[int, str]]]:
    """An input with two recovery moves and no bad line, and where each is said: the Stage-A
    retry (closed by its RunEnd), then a run cut off after its fifth line (the agent died inside
    its first turn)."""
    retried = STAGE_A.read_bytes()
    cut = b"".join(events("tool_use_two_turns").splitlines(keepends=True)[:5])
    return retried + cut, [(4, "retried_turn"), (retried.count(b"\n") + 5, "truncated")]


@dataclass
class Run:
    """What one drive of the core produced."""

    output: bytes
    diagnostics: list[str]
    rejects: bytes
    core: Translator

    @property
    def frames(self) -> list[dict[str, Any]]:
        return frames_of(self.output)

    @property
    def results(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == "result"]


def drive(
    chunks: list[tuple[bytes, float]] | bytes,
    *,
    end: float | None = 0.0,
    partial: bool = False,
    results_only: bool = False,
    rates: RateCard | None = None,
    started_at: float = 0.0,
    **options: Any,
) -> Run:
    """Feed the core (bytes, or (chunk, arrival time) pairs) and end the input at `end`
    (None: leave the input open)."""
    options.setdefault("clock", "estimated")
    core = Translator(
        EnrichedEncoder([], session_id=SESSION, partial=partial, results_only=results_only),
        rates=rates or RateCard.bundled(),
        options=Options(**options),
        started_at=started_at,
        source="test",
    )
    if isinstance(chunks, bytes):
        chunks = [(chunks, 0.0)]
    out, diags, rejects = [], [], []
    for data, now in chunks:
        core.feed(data, now)
        out.append(core.take_output())
        diags += core.take_diagnostics()
        rejects.append(core.take_rejects())
    if end is not None:
        core.end(end)
    out.append(core.take_output())
    diags += core.take_diagnostics()
    rejects.append(core.take_rejects())
    return Run(b"".join(out), diags, b"".join(rejects), core)


def line(**event: Any) -> bytes:
    """One compact event line, keys in the order given (as serde writes them)."""
    return orjson.dumps(event) + b"\n"


def run_end(stopped_for: Any = "EndOfTurn", turns: int = 0, **extra: Any) -> bytes:
    return line(
        type="RunEnd",
        final_messages=[],
        total_usage=extra.pop("total_usage", {"input_tokens": 0, "output_tokens": 0}),
        turn_count=turns,
        stopped_for=stopped_for,
        turns_without_edit=turns,
        no_edit_nudge_emitted=False,
        **extra,
    )


def turn(
    index: int,
    text: str | None,
    *,
    deltas: list[str] | None = None,
    thinking: str | None = None,
    model: str = "claude-sonnet-4-5",
    usage: dict[str, int] | None = None,
    **extra: Any,
) -> bytes:
    """A whole turn: TurnStart, its deltas, TurnEnd."""
    content = []
    out = line(type="TurnStart", turn_index=index, message_id=f"msg_{index}", model=model)
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
        out += line(type="AssistantThinkingDelta", turn_index=index, content_block_index=0, text=thinking)
    for piece in deltas if deltas is not None else ([text] if text else []):
        out += line(type="AssistantTextDelta", turn_index=index, content_block_index=len(content), text=piece)
    if text is not None:
        content.append({"type": "text", "text": text})
    out += line(
        type="TurnEnd",
        turn_index=index,
        assistant_message={"role": "assistant", "content": content},
        tool_results=[],
        stop_reason="end_turn",
        usage=usage or {"input_tokens": 10, "output_tokens": 5},
        ttft=extra.get("ttft", {"secs": 0, "nanos": 100_000_000}),
        tbt=extra.get("tbt", {"secs": 0, "nanos": 10_000_000}),
    )
    return out


Reap = Callable[["subprocess.Popen[bytes]"], "subprocess.Popen[bytes]"]


def drive_cc(data: bytes, *, partial: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Translate `data` in one chunk to the Claude Code format (estimated clock): the frames and
    the diagnostics (the unknown-model warnings of mock models left out)."""
    from translator.encoders.claude_code import ClaudeCodeEncoder

    rates = RateCard.bundled()
    core = Translator(ClaudeCodeEncoder([], session_id="S", partial=partial, limits=rates.limits),
                      rates=rates, options=Options(clock="estimated"))
    core.feed(data, 0.0)
    core.end(0.0)
    diagnostics = [d for d in core.take_diagnostics() if "no rate for model" not in d]
    return frames_of(core.take_output()), diagnostics


def claude_code(data: bytes, partial: bool = False) -> list[dict[str, Any]]:
    frames, diagnostics = drive_cc(data, partial=partial)
    assert diagnostics == []
    return frames


def translate_bytes(data: bytes, fmt: str, *, partial: bool = False, **options: Any) -> Run:
    """Translate `data` in one chunk to `fmt` ("enriched" or "claude-code", fresh ids numbered
    so that two drives compare byte for byte) under the estimated clock and `options`."""
    from itertools import count

    from translator.encoders.claude_code import ClaudeCodeEncoder

    rates = RateCard.bundled()
    ids = count()
    encoder = (
        ClaudeCodeEncoder([], session_id="S", partial=partial, limits=rates.limits, new_id=lambda: f"id-{next(ids)}")
        if fmt == "claude-code"
        else EnrichedEncoder([], session_id="S", partial=partial)
    )
    options.setdefault("clock", "estimated")
    core = Translator(encoder, rates=rates, options=Options(**options), source="test")
    core.feed(data, 0.0)
    core.end(0.0)
    return Run(core.take_output(), core.take_diagnostics(), core.take_rejects(), core)


# The fixtures whose Claude Code captures were made with partial messages.
CC_PARTIAL = {"partial_messages", "thinking_partial"}


def kind(frame: dict[str, Any]) -> str:
    """A Claude Code frame's kind: its type, `system/<subtype>` or `stream_event/<event type>`."""
    if frame["type"] == "stream_event":
        return f"stream_event/{frame['event']['type']}"
    return f"{frame['type']}/{frame['subtype']}" if "subtype" in frame and frame["type"] == "system" else frame["type"]


def translate_cc(name: str, **options: Any) -> list[dict[str, Any]]:
    """A fixture's raw events in Claude Code's frames (fresh ids numbered), with no diagnostics."""
    return cc_frames(events(name), partial=name in CC_PARTIAL, **options)


def cc_frames(data: bytes, *, partial: bool = False, **options: Any) -> list[dict[str, Any]]:
    """`data` (either dialect) in Claude Code's frames (fresh ids numbered), with no diagnostics."""
    from itertools import count

    from translator.encoders.claude_code import ClaudeCodeEncoder

    ids = count()
    rates = RateCard.bundled()
    encoder = ClaudeCodeEncoder(
        [], session_id="SESSION", partial=partial, limits=rates.limits,
        new_id=lambda: f"id-{next(ids)}", **options,
    )
    core = Translator(encoder, rates=rates, options=Options(clock="estimated"))
    core.feed(data, 0.0)
    core.end(0.0)
    assert core.take_diagnostics() == []
    return frames_of(core.take_output())


def tracked_copy(dest: Path) -> None:
    """The repository as a fresh clone has it: its tracked files, as they are in the work tree."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def npm_installed(cache: Path, packages: dict[str, str], *, omit_optional: bool = True) -> Path:
    """`cache`/node_modules with each package at its version, installed by npm the first time.
    Under a lock on the cache: the suite's workers (pytest -n) and other checkouts' suites share
    it, and two npm installs at once into one folder leave it broken."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [f"{name}@{version}" for name, version in packages.items()
                   if _npm_version(cache / "node_modules" / name / "package.json") != version]
        if missing:
            if not (cache / "package.json").exists():
                (cache / "package.json").write_text(f'{{"name": "{cache.name}-cache", "private": true}}\n')
            omit = ["--omit=optional"] if omit_optional else []
            subprocess.run(["npm", "install", *omit, "--no-audit", "--no-fund", *missing],
                           cwd=cache, check=True, capture_output=True, timeout=600)  # fmt: skip
    return cache / "node_modules"


def _npm_version(manifest: Path) -> str | None:
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


# The TypeScript Agent SDK from npm, for the tests that run it under node (test_shim_ts_sdk.py,
# test_shim_drive_ts.py).
TS_SDK_VERSION = "0.3.333"
TS_SDK_PACKAGE = "@anthropic-ai/claude-agent-sdk"
TS_SDK_CACHE = Path(os.environ.get("CALIBAN_CLAUDE_TS_SDK_CACHE") or Path.home() / ".cache" / "caliban-claude-ts-sdk")
TS_SDK_SKIPPED = "the TypeScript Agent SDK tests were SKIPPED: node and npm are not installed (.ci/run installs them)"
