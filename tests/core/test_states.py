"""The fold's state machine on its own: every legal move, the illegal ones, the recoveries."""

from __future__ import annotations

import pytest

from translator.core.states import (
    CUT,
    LOST,
    LOST_RESULT,
    QUIET,
    RETRIED,
    STAYS,
    TRANSITIONS,
    IllegalMove,
    Move,
    Recovery,
    RunState,
    State,
    To,
)
from translator.core.stops import LOST_RUN_END, TRUNCATED

LEGAL = [(state, move, to) for state, moves in TRANSITIONS.items() for move, to in moves.items()]
STATES = [State.NO_RUN, State.IN_RUN, State.IN_TURN]
MOVES = [value for name, value in vars(Move).items() if name.isupper()]
ILLEGAL = [(state, move) for state in STATES for move in MOVES if move not in TRANSITIONS[state]]


def at(state: str) -> RunState:
    machine = RunState()
    machine.state = state
    return machine


@pytest.mark.parametrize(("state", "move", "to"), LEGAL)
def test_every_legal_move(state: str, move: str, to: To) -> None:
    recovered: list[Recovery] = []
    machine = at(state)
    assert machine.move(move, recovered.append) == to
    assert machine.state is to.state
    assert recovered == ([] if to.recovery is None else [to.recovery])


@pytest.mark.parametrize(("state", "move", "to"), LEGAL)
def test_the_quiet_moves_and_where_they_stay_are_read_off_the_table(state: str, move: str, to: To) -> None:
    # QUIET: where a move says and closes nothing, where it leads; STAYS: where it leads nowhere
    assert QUIET[move].get(state) == (to.state if to.recovery is None else None)
    assert (state in STAYS[move]) == (to.recovery is None and to.state == state)


@pytest.mark.parametrize(("state", "move"), ILLEGAL)
def test_an_illegal_move_is_reported_and_changes_nothing(state: str, move: str) -> None:
    assert state not in QUIET[move]
    machine = at(state)
    with pytest.raises(IllegalMove, match=state):
        machine.move(move, lambda recovery: pytest.fail(recovery.says))
    assert machine.state is state


def test_the_illegal_moves_are_the_turn_moves_without_a_turn() -> None:
    assert set(ILLEGAL) == {(State.NO_RUN, Move.RETRY), (State.NO_RUN, Move.RESTART), (State.NO_RUN, Move.NEW_RUN),
                            (State.IN_RUN, Move.RETRY)}


def test_the_table_lists_every_state_and_only_known_moves() -> None:
    assert set(TRANSITIONS) == set(STATES) and len(MOVES) == 10
    assert all(set(moves) <= set(MOVES) and to.state in STATES for moves in TRANSITIONS.values() for to in moves.values())


def test_recoveries() -> None:
    recoveries = {(state, move): to.recovery for state, move, to in LEGAL if to.recovery is not None}
    assert recoveries == {
        (State.IN_RUN, Move.RESTART): LOST,
        (State.IN_TURN, Move.RESTART): LOST,
        (State.IN_RUN, Move.NEW_RUN): LOST_RESULT,
        (State.IN_TURN, Move.NEW_RUN): LOST_RESULT,
        (State.IN_RUN, Move.INPUT_END): CUT,
        (State.IN_TURN, Move.INPUT_END): CUT,
        (State.IN_TURN, Move.RETRY): RETRIED,
    }


def test_what_each_recovery_says_and_closes() -> None:
    # The lost RunEnd and the cut close the open run with the result's error text and warn;
    # a retry is the agent's own move: it closes nothing and is only information.
    assert [(r.kind, r.level, r.closes) for r in (LOST, LOST_RESULT, CUT, RETRIED)] == [
        ("lost_run_end", "warning", LOST_RUN_END),
        ("lost_run_end", "warning", LOST_RUN_END),
        ("truncated", "warning", TRUNCATED),
        ("retried_turn", "info", None),
    ]
    assert all(r.says and r.says != r.closes for r in (LOST, LOST_RESULT, CUT, RETRIED))


def test_a_run_of_two_turns() -> None:
    machine = RunState()
    path = [Move.TURN_START, Move.MODEL, Move.TOOL_END, Move.TURN_END, Move.TURN_START, Move.RETRY,
            Move.MODEL, Move.TURN_END, Move.RUN_END]
    states, recovered = [], []
    for move in path:
        machine.move(move, recovered.append)
        states.append(machine.state)
    assert states == [State.IN_TURN, State.IN_TURN, State.IN_TURN, State.IN_RUN, State.IN_TURN, State.IN_TURN,
                      State.IN_TURN, State.IN_RUN, State.NO_RUN]
    assert recovered == [RETRIED]


def test_where_each_move_leads() -> None:
    # Written out here, not read from the table: an entry that changes must be changed here too.
    no_run, in_run, in_turn = State.NO_RUN, State.IN_RUN, State.IN_TURN
    assert {(state, move): to.state for state, move, to in LEGAL} == {
        (no_run, Move.RUN_START): in_run,
        (no_run, Move.TURN_START): in_turn,
        (no_run, Move.MODEL): in_turn,
        (no_run, Move.TOOL_END): in_run,
        (no_run, Move.TURN_END): in_run,
        (no_run, Move.RUN_END): no_run,
        (no_run, Move.INPUT_END): no_run,
        (in_run, Move.RUN_START): in_run,
        (in_run, Move.TURN_START): in_turn,
        (in_run, Move.RESTART): in_turn,
        (in_run, Move.NEW_RUN): in_run,
        (in_run, Move.MODEL): in_turn,
        (in_run, Move.TOOL_END): in_run,
        (in_run, Move.TURN_END): in_run,
        (in_run, Move.RUN_END): no_run,
        (in_run, Move.INPUT_END): no_run,
        (in_turn, Move.RUN_START): in_turn,
        (in_turn, Move.TURN_START): in_turn,
        (in_turn, Move.RETRY): in_turn,
        (in_turn, Move.RESTART): in_turn,
        (in_turn, Move.NEW_RUN): in_run,
        (in_turn, Move.MODEL): in_turn,
        (in_turn, Move.TOOL_END): in_turn,
        (in_turn, Move.TURN_END): in_run,
        (in_turn, Move.RUN_END): no_run,
        (in_turn, Move.INPUT_END): no_run,
    }


@pytest.mark.parametrize(("state", "move", "to"), [entry for entry in LEGAL if entry[2].recovery is not None])
def test_a_recovery_is_said_from_where_it_began_and_the_table_has_the_last_word(state: str, move: str, to: To) -> None:
    # The fold closes the open run inside `recover` (a RUN_END move of its own); the entry's
    # state is where the machine ends all the same.
    machine = at(state)
    seen: list[str] = []

    def recover(recovery: Recovery) -> None:
        seen.append(machine.state)
        if recovery.closes is not None:
            machine.move(Move.RUN_END, lambda inner: pytest.fail(inner.says))

    assert machine.move(move, recover) == to
    assert seen == [state] and machine.state is to.state
