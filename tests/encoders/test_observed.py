"""The observer hook (translator/encoders/observed.py): what the core produces, watched beside
the frames, through the real core on the recorded conversation; the frames are the same bytes
watched or not, in both formats, and the observer is told each run, turn and tool call with
the times the fold worked out."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from support_fixtures import FIXTURES

from translator.core.feed import Feed, new_core, steps
from translator.core.prompts import Prompts, prompted
from translator.core.rates import RateCard
from translator.core.translator import Options
from translator.encoders import RunSummary
from translator.encoders.formats import make_encoder
from translator.encoders.observed import MOVES, Observed, Quiet, StreamId, takes
from translator.model import ToolCallEnd, ToolCallStart, TurnEnd, TurnStart

FIXTURE = FIXTURES / "tool_use_two_turns.events.jsonl"


class Log:
    """An observer that writes down what it is told (it names no moves it takes: it is told all)."""

    timed = True

    def __init__(self) -> None:
        self.moves: list[tuple[Any, ...]] = []

    def stream_open(self, stream: StreamId, t: float) -> None:
        self.moves.append(("stream_open", *stream, t))

    def prompt(self, content: Any, t: float) -> None:
        self.moves.append(("prompt", content, t))

    def interrupted(self, t: float) -> None:
        self.moves.append(("interrupted", t))

    def headless_frame(self, frame: Any, t: float) -> None:
        pass

    def run_start(self, model: str | None, t: float) -> None:
        self.moves.append(("run_start", model, t))

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self.moves.append(("turn_start", ev.turn_index, ev.model, t))

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        self.moves.append(("tool_start", ev.tool_use_id, ev.name, t))

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        self.moves.append(("tool_end", tool_use_id, name, input, end.is_error, t))

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self.moves.append(("turn_end", ev.turn_index, model, ev.usage.input_tokens, cost, t))

    def run_end(self, run: RunSummary, t: float) -> None:
        self.moves.append(("run_end", run.subtype, run.turns, run.cost_usd, t))


def translate(fmt: str, observer: Any) -> bytes:
    card = RateCard.default({})
    numbers = itertools.count()
    encoder = make_encoder(fmt, "sid-1", rates=card, new_id=lambda: f"id-{next(numbers)}")  # type: ignore[arg-type]
    core = new_core(encoder, rates=card, options=Options(), clock="auto",  # type: ignore[arg-type]
                    live=False, epoch=1_800_000_000.0, source="fixture", observer=observer,
                    stream=StreamId("fixture", "sid-1", "/project"))
    return b"".join(b"".join(taken.frames) for taken in steps(Feed(core), [FIXTURE.read_bytes()]))


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_the_frames_are_the_same_watched_or_not(fmt: str) -> None:
    log = Log()
    assert translate(fmt, log) == translate(fmt, None)
    assert log.moves


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_the_observer_is_told_each_run_turn_and_tool_call_in_order_with_times(fmt: str) -> None:
    log = Log()
    translate(fmt, log)
    opened, *log.moves = log.moves
    assert opened == ("stream_open", "fixture", "sid-1", "/project", 1_800_000_000.0)  # first, with its identity
    names = [move[0] for move in log.moves]
    assert names == ["run_start", "turn_start", "tool_start", "tool_end", "turn_end", "turn_start", "turn_end", "prompt",
                     "run_end"]
    # the run's prompt, found once in its RunEnd's history (core/prompts.py), told at the run's start time
    assert log.moves[7][1:] == ([{"type": "text", "text": "how many files are here?"}], log.moves[0][-1])
    tool_end = log.moves[3]
    assert tool_end[1:5] == ("toolu_01Ab3CdE4fGh5iJk6LmN7oPq", "Bash", {"command": "ls | wc -l"}, False)
    turn_ends = [m for m in log.moves if m[0] == "turn_end"]
    assert [m[1:4] for m in turn_ends] == [(0, "claude-sonnet-4-5", 3100), (1, "claude-sonnet-4-5", 3276)]
    assert all(m[4] > 0 for m in turn_ends)
    run_end = log.moves[-1]
    assert run_end[1:3] == ("success", 2)
    assert run_end[3] == pytest.approx(turn_ends[0][4] + turn_ends[1][4])  # the turns' costs, the frames' card
    times = [move[-1] for move in log.moves if move[0] != "prompt"]
    assert times == sorted(times)  # estimated from the recorded ttft/tbt, on the replay's epoch
    assert times[0] >= 1_800_000_000.0 and times[-1] > times[0]


class Ends(Quiet):
    """A watcher of the runs' results alone (as the metrics' counts, the results table's rows)."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, int, str | None]] = []

    def run_end(self, run: RunSummary, t: float) -> None:
        self.ends.append((run.subtype, run.turns, run.model))


def test_an_observer_that_names_none_takes_every_move_and_its_prompts() -> None:
    log = Log()
    assert takes(log) == MOVES
    assert isinstance(prompted(log), Prompts)


@pytest.mark.parametrize("fmt", ["enriched", "claude-code"])
def test_a_watcher_is_told_only_the_moves_it_takes_and_no_tee_stands_in_the_others_way(fmt: str) -> None:
    ends = Ends()
    assert takes(ends) == {"run_end"} and takes(Quiet()) == frozenset()
    assert translate(fmt, ends) == translate(fmt, None)
    assert ends.ends == [("success", 2, "claude-sonnet-4-5")]  # the model its last turn ran on
    assert prompted(ends) is ends  # no history decoded for a prompt nobody takes
    encoder = make_encoder(fmt, "sid-1", rates=RateCard.default({}))
    tee = Observed(encoder, ends, StreamId("fixture", "sid-1", "/project"))
    assert tee.result != encoder.result  # told, then passed on
    for move in ("run_start", "turn_start", "tool_start", "tool_call", "turn_end"):
        assert getattr(tee, move) == getattr(encoder, move)  # the encoder's own method: no tee
    core = new_core(encoder, rates=RateCard.default({}), options=Options(), clock="auto", live=False, epoch=0.0,
                    source="fixture", observer=Quiet(), stream=StreamId("fixture", "sid-1", "/project"))
    assert core.fold.runs.encoder is encoder  # an observer that takes nothing is not in the way at all
