"""The fold's states and the one table of its legal moves (after h11's `_state.py`).

A stream is, at any moment, outside any run, inside a run between turns, or inside a turn.
Every event the readers hand the fold is one of the moves below; `TRANSITIONS` says where each
move leads from each state. The recoveries — a run whose `RunEnd` was lost, a stream cut off
inside a run, a retried turn — are entries like any other, carrying what the fold says about
them (a notice on stderr, never a bad line) and, for the first two, the error text the open
run is closed with. A move missing from the table is illegal: `RunState.move` raises
`IllegalMove`, and the fold's last resort reports it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from translator.core.stops import LOST_RUN_END, TRUNCATED


class State:
    """The states (strings: a table lookup is on the hot path, and an Enum hashes in Python)."""

    NO_RUN = "no run"
    IN_RUN = "in run"  # a run is open, between turns
    IN_TURN = "in turn"  # a turn is open (its TurnEnd not seen yet)


class Move:
    """The moves the readers make (their values say what happened)."""

    RUN_START = "a run opens without a turn (a headless init, echoed prompt or result)"
    TURN_START = "a turn starts"
    RETRY = "the open turn is sent again (the same turn_index before its TurnEnd)"
    RESTART = "turn_index 0 again after a completed turn: a new run"
    NEW_RUN = "a headless init inside a run that had a turn: a new run"
    MODEL = "the model streams (a delta, a tool call starting or its input)"
    TOOL_END = "a tool call ends with its result"
    TURN_END = "the turn ends"
    RUN_END = "the run is closed (its RunEnd or result; a cut, a signal, a failure)"
    INPUT_END = "the input ends"


# A Struct rather than a dataclass: built in C at import (a dataclass costs ~0.5 ms a start).
class Recovery(msgspec.Struct, frozen=True):
    """What a recovery move does: `says` is reported at the line where it happened (`kind` names
    it in JSON logs, `level` is warning or info); with `closes`, the open run is first closed as an
    error with that text."""

    kind: str
    says: str
    level: str = "warning"
    closes: str | None = None


LOST = Recovery(
    "lost_run_end",
    "turn_index 0 again after a completed turn: the open run's RunEnd is missing; "
    "that run is closed as an error and a new one begins",
    closes=LOST_RUN_END,
)
LOST_RESULT = Recovery(
    "lost_run_end",
    "a new init inside a run that had a turn: the open run's result is missing; "
    "that run is closed as an error and a new one begins",
    closes=LOST_RUN_END,
)
CUT = Recovery(
    "truncated", "the input ended inside a run (no RunEnd); that run is closed as an error", closes=TRUNCATED
)
RETRIED = Recovery(
    "retried_turn",
    "the open turn was sent again (its turn_index before its TurnEnd): the agent retried it; "
    "the abandoned attempt is not part of the reply",
    level="info",
)


# A Struct rather than a dataclass: built in C at import (a dataclass costs ~0.5 ms a start).
class To(msgspec.Struct, frozen=True):
    """Where a move leads; `recovery`: what is said (and closed) on the way."""

    state: str
    recovery: Recovery | None = None


NO_RUN, IN_RUN, IN_TURN = State.NO_RUN, State.IN_RUN, State.IN_TURN
M = Move

TRANSITIONS: dict[str, dict[str, To]] = {
    NO_RUN: {
        M.RUN_START: To(IN_RUN),
        M.TURN_START: To(IN_TURN),
        M.MODEL: To(IN_TURN),  # a stream joined inside a turn (a follower started from the end)
        M.TOOL_END: To(IN_RUN),
        M.TURN_END: To(IN_RUN),
        M.RUN_END: To(NO_RUN),
        M.INPUT_END: To(NO_RUN),
    },
    IN_RUN: {
        M.RUN_START: To(IN_RUN),
        M.TURN_START: To(IN_TURN),
        M.RESTART: To(IN_TURN, LOST),
        M.NEW_RUN: To(IN_RUN, LOST_RESULT),
        M.MODEL: To(IN_TURN),
        M.TOOL_END: To(IN_RUN),
        M.TURN_END: To(IN_RUN),
        M.RUN_END: To(NO_RUN),
        M.INPUT_END: To(NO_RUN, CUT),
    },
    IN_TURN: {
        M.RUN_START: To(IN_TURN),
        M.TURN_START: To(IN_TURN),  # a TurnStart whose predecessor never ended: a new turn
        M.RETRY: To(IN_TURN, RETRIED),  # the agent's max_tokens or drain retry: nothing closes
        M.RESTART: To(IN_TURN, LOST),
        M.NEW_RUN: To(IN_RUN, LOST_RESULT),
        M.MODEL: To(IN_TURN),
        M.TOOL_END: To(IN_TURN),
        M.TURN_END: To(IN_RUN),
        M.RUN_END: To(NO_RUN),
        M.INPUT_END: To(NO_RUN, CUT),
    },
}


# The moves that say and close nothing, read off the table: `QUIET[move]` maps each state where
# it is such a move to the state it leads to; the fold's hot path makes it without a call.
# `STAYS[move]`: the states where it changes nothing (it leads where it is made); the hot path
# skips it there.
QUIET = {
    move: {state: to.state for state, row in TRANSITIONS.items() if (to := row.get(move)) is not None and to.recovery is None}
    for move in {move for row in TRANSITIONS.values() for move in row}
}
STAYS = {move: frozenset(state for state, to in leads.items() if to == state) for move, leads in QUIET.items()}


class IllegalMove(Exception):
    """A move the table does not list for the current state (a bug in a reader)."""


class RunState:
    """The current state; it changes only through the table (`move`, or a `QUIET` entry)."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: str = NO_RUN

    def move(self, move: str, recover: Callable[[Recovery], None]) -> To:
        """Make `move`; a recovery entry first has `recover` say it (and close the open run)."""
        to = TRANSITIONS[self.state].get(move)
        if to is None:
            raise IllegalMove(f"{move} cannot happen {self.state}")
        if to.recovery is not None:
            recover(to.recovery)
        self.state = to.state
        return to
