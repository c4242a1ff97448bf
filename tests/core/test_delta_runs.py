"""The batch path hands a run of consecutive deltas (text and thinking alike) to the fold as one,
wherever it lies in a chunk, and a failure inside one is said at the run's last line."""

from __future__ import annotations

from typing import Any

from support_fixtures import events, frames_of, lines_of

from translator.core.rates import RateCard
from translator.core.translator import Options, Translator
from translator.encoders import RAW
from translator.encoders.enriched import EnrichedEncoder
from translator.model import DeltaRun

THINKING = events("thinking")  # a TurnStart, 3 thinking and 2 text deltas, its TurnEnd and RunEnd


class RunsSeen(EnrichedEncoder):
    """The default format, told each run of deltas (raw): how many deltas each held."""

    def __init__(self) -> None:
        super().__init__([], session_id="S")
        self.delta_mode = RAW
        self.runs: list[int] = []

    def raw_deltas(self, run: DeltaRun, t: float) -> None:
        self.runs.append(run.count)


class BrokenOnThinking(EnrichedEncoder):
    """Partial messages that cannot write a thinking delta."""

    def __init__(self) -> None:
        super().__init__([], session_id="S", partial=True)

    def thinking_delta(self, ev: Any, t: float) -> None:
        raise RuntimeError("cannot think")


def core(encoder: EnrichedEncoder, **options: Any) -> Translator:
    return Translator(encoder, rates=RateCard.bundled(), options=Options(clock="estimated", **options), source="in")


def runs_of(chunks: list[bytes]) -> list[int]:
    encoder = RunsSeen()
    translator = core(encoder)
    for chunk in chunks:
        translator.feed(chunk, 0.0)
    translator.end(0.0)
    assert not translator.take_diagnostics()
    return encoder.runs


def test_text_and_thinking_deltas_in_a_row_are_one_run() -> None:
    assert runs_of([THINKING]) == [5]


def test_a_run_cut_by_a_chunk_is_handed_on_in_its_pieces() -> None:
    lines = THINKING.splitlines(keepends=True)
    # the chunk ends inside the run, then the next begins with its rest
    assert runs_of([b"".join(lines[:3]), b"".join(lines[3:])]) == [2, 3]
    # ... inside a line: that line is read on its own, between the two
    assert runs_of([b"".join(lines[:3]) + lines[3][:9], lines[3][9:] + b"".join(lines[4:])]) == [2, 1, 2]
    # a chunk of deltas alone, between two others
    assert runs_of([b"".join(lines[:1]), b"".join(lines[1:6]), b"".join(lines[6:])]) == [5]


def test_a_failure_inside_a_run_is_said_at_its_last_line_and_the_stream_goes_on() -> None:
    translator = core(BrokenOnThinking())
    translator.feed(THINKING + THINKING, 0.0)
    translator.end(0.0)
    results = [f for f in frames_of(translator.take_output()) if f["type"] == "result"]
    assert [r.get("error") for r in results] == [f"internal error at line {n}: RuntimeError" for n in (6, 14)]
    assert translator.take_diagnostics() == [
        f"translator: in:{n}: cannot be translated (internal error, RuntimeError: cannot think): "
        f"{lines_of('thinking')[5][:80].decode()}"
        for n in (6, 14)
    ]
    assert translator.take_rejects() == (lines_of("thinking")[5] + b"\n") * 2


def test_on_invalid_fail_stops_at_the_run_that_failed() -> None:
    translator = core(BrokenOnThinking(), stop_on_invalid=True)
    translator.feed(THINKING + THINKING, 0.0)
    assert translator.stopped and translator.line_no == 6
    frames = frames_of(translator.take_output())
    assert [f["type"] for f in frames] == ["system", "result"]  # nothing of the run after it
    assert frames[-1]["error"] == "input rejected at line 6: cannot be translated (internal error, RuntimeError: cannot think)"
