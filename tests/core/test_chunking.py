"""The same bytes cut into any chunks give the same output, diagnostics and rejects."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_fixtures import FIXTURES, SCENARIOS, drive, events, reported

from bench.gen import run_events
from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.encoders.claude_code import ClaudeCodeEncoder
from translator.encoders.enriched import EnrichedEncoder

# Every fixture, a generated multi-turn run, bad lines of each kind, CRLF, blanks, an over-long
# line and a last line without a newline: the awkward cases all meet chunk boundaries.
CORPUS = (
    b"".join(events(name) for name in SCENARIOS)
    + b"\n".join(run_events(random.Random(1), 1))
    + b"\nnot json\n\n"
    + events("thinking").replace(b"\n", b"\r\n")
    + b'{"type":"AssistantTextDelta","turn_index":0,"content_block_index":0,"text":"' + b"z" * 30000 + b'"}\n'
    + b'{"type":"TurnStart","turn_index":0}\n'
    + b"\xff\n"
    + events("tool_use_two_turns")[:-40]
)
MAX_LINE = 20000


def translate_in(cuts: list[int], **options: object) -> tuple[bytes, list[str], bytes]:
    bounds = sorted({0, len(CORPUS), *cuts})
    chunks = [(CORPUS[a:b], 0.0) for a, b in itertools.pairwise(bounds)]
    run = drive(chunks, max_line_bytes=MAX_LINE, **options)
    return run.output, run.diagnostics, run.rejects


WHOLE = translate_in([])


def test_the_corpus_exercises_the_awkward_cases() -> None:
    output, diagnostics, _rejects = WHOLE
    # not json, over-long, malformed TurnStart, \xff, cut last line; then the run it was in is closed
    kinds = [kind for _, kind in reported(diagnostics)]
    assert kinds == ["invalid_json", "too_long", "malformed_event", "invalid_utf8", "invalid_json", "truncated"]
    assert output.count(b'"type":"result"') == len(SCENARIOS) + 1 + 1 + 1 + 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(CORPUS) - 1), max_size=60))
def test_any_chunking_gives_identical_output(cuts: list[int]) -> None:
    assert translate_in(cuts) == WHOLE


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=97))
def test_fixed_small_chunks(size: int) -> None:
    assert translate_in(list(range(size, len(CORPUS), size))) == WHOLE


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(CORPUS) - 1), max_size=30))
def test_any_chunking_with_partial_messages(cuts: list[int]) -> None:
    assert translate_in(cuts, partial=True) == translate_in([], partial=True)


HEADLESS_CORPUS = b"".join(
    (FIXTURES / "headless" / name).read_bytes()
    for name in ("multi_input_frames.replay.jsonl", "tool_use_two_turns.partial.pre0049.jsonl",
                 "max_turns.pre0049.jsonl", "api_error.jsonl")
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(HEADLESS_CORPUS) - 1), max_size=40))
def test_any_chunking_of_a_headless_stream(cuts: list[int]) -> None:
    bounds = sorted({0, len(HEADLESS_CORPUS), *cuts})
    chunks = [(HEADLESS_CORPUS[a:b], 0.0) for a, b in itertools.pairwise(bounds)]
    assert drive(chunks).output == drive(HEADLESS_CORPUS).output


# The four output modes, fed with delays between chunks: under the estimated clock nothing of
# the output may depend on when or in what pieces the bytes arrived (timestamps,
# thinking_duration_ms, ttft_ms, message ids are all read off the input). The corpus adds the
# agent's real samples (a retried turn, thinking without a signature, a StreamIdle run).
MODES_CORPUS = CORPUS + b"\n" + b"".join(
    p.read_bytes() for p in sorted((FIXTURES / "samples" / "raw-derived-from-code").glob("*.ndjson")))


def translate_mode(cuts: list[int], fmt: str, partial: bool) -> tuple[bytes, list[str], bytes]:
    rates = RateCard.bundled()
    ids = itertools.count()
    encoder: Any = (
        EnrichedEncoder([], session_id="S", partial=partial) if fmt == "enriched" else
        ClaudeCodeEncoder([], session_id="S", partial=partial, limits=rates.limits, new_id=lambda: f"id-{next(ids)}")
    )
    core = Translator(encoder, rates=rates, options=Options(clock="estimated", max_line_bytes=MAX_LINE, epoch=1.8e9),
                      started_at=5.0)
    bounds = sorted({0, len(MODES_CORPUS), *cuts})
    out, diagnostics, rejects = [], [], []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        core.feed(MODES_CORPUS[a:b], 5.0 + 0.731 * i)  # a new arrival time for every chunk
        out.append(core.take_output())
        diagnostics += core.take_diagnostics()
        rejects.append(core.take_rejects())
    core.end(5.0 + 0.731 * len(bounds))
    out.append(core.take_output())
    diagnostics += core.take_diagnostics()
    rejects.append(core.take_rejects())
    return b"".join(out), diagnostics, b"".join(rejects)


MODES = [("enriched", False), ("enriched", True), ("claude-code", False), ("claude-code", True)]
WHOLE_MODES = {mode: translate_mode([], *mode) for mode in MODES}


def test_the_modes_corpus_has_thinking_and_retries() -> None:
    output = WHOLE_MODES[("claude-code", True)][0]
    assert b'"thinking_duration_ms"' in output and b'"subtype":"api_retry"' in output


@pytest.mark.parametrize("mode", MODES, ids=lambda m: f"{m[0]}{'-partial' if m[1] else ''}")
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(MODES_CORPUS) - 1), max_size=40))
def test_any_chunking_and_timing_gives_identical_output_in_every_mode(mode: tuple[str, bool], cuts: list[int]) -> None:
    assert translate_mode(cuts, *mode) == WHOLE_MODES[mode]


def test_two_events_on_one_line_are_a_bad_line_even_beside_a_blank_line() -> None:
    """A line holding two events is a bad line however the input is cut. The batch once took a
    chunk whose count of decoded events matched its count of newlines, so a blank line in the
    same chunk hid such a line: both its events were translated and nothing was said."""
    first, second, *rest = events("tool_use_two_turns").splitlines(keepends=True)
    glued = first.rstrip(b"\n") + b" " + second + b"\n" + b"".join(rest)  # then a blank line
    for chunks in ([(glued, 0.0)], [(glued[:10], 0.0), (glued[10:], 0.0)]):
        run = drive(chunks)
        assert reported(run.diagnostics) == [(1, "invalid_json")]
        assert "unexpected content after document" in run.diagnostics[0]
        assert run.rejects == first.rstrip(b"\n") + b" " + second


@pytest.mark.parametrize("white", [b" ", b"\t", b" \t ", b"\r"])
def test_a_whitespace_only_line_is_a_blank_line(monkeypatch: pytest.MonkeyPatch, white: bytes) -> None:
    """Spaces, tabs, or a CRLF file's blank line (`\\r`): counted and skipped as a blank line is,
    in both dialects, never reported. One sent its whole stretch of the chunk line by line (the
    batch decode fails on it, and only `\\n\\n` was looked for): twice the time of blank lines."""
    from translator.core.raw import RawReader

    read_alone: list[bytes] = []
    read = RawReader.read
    monkeypatch.setattr(RawReader, "read", lambda self, line: read_alone.append(line) or read(self, line))
    for data in (events("tool_use_two_turns"), (FIXTURES / "headless" / "tool_use_two_turns.jsonl").read_bytes()):
        lines = data.splitlines(keepends=True)
        spaced = b"".join(line + white + b"\n" for line in lines[:-1]) + white + b"\n" + lines[-1] + b"oops\n"
        run = drive(spaced)
        alone = read_alone[:]
        assert run.output == drive(data + b"oops\n").output
        assert reported(run.diagnostics) == [(2 * len(lines) + 1, "invalid_json")]
        assert run.rejects == b"oops\n"
        if data.startswith(b'{"type":"TurnStart"'):  # raw events: each in a batch, but the bad line's stretch
            assert alone == [lines[-1].rstrip(b"\n"), b"oops"]
        read_alone.clear()
