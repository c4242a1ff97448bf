"""How a message's run on the drive backend stops, as a table (h2's stream.py style): (state,
input) -> (action, new state), the state read where the run is followed and where it ends.

A run is `running` until the first of: the app's interrupt (`user`), or a decision of the gate
that ends the run: a deny with interrupt (`tool`), a PreToolUse hook's defer (`defer`), its
`continue: false` (`hook`). The first stands; the app's interrupt always ends caliban's server
(the surface has no cancel). The three the gate ends follow the run to its turn's end, the
user's ends it at once.
"""

from __future__ import annotations

from typing import Literal

State = Literal["running", "user", "tool", "defer", "hook"]
# The app's interrupt, or the verdict of a decision that ends the run (permissions/gate.py).
Input = Literal["user", "interrupt", "defer", "stop"]
# kill: end caliban's server now (which ends the run); turn: follow the run to its turn's end.
Action = Literal["kill", "turn", "none"]

TABLE: dict[tuple[State, Input], tuple[Action, State]] = {
    ("running", "user"): ("kill", "user"),
    ("running", "interrupt"): ("turn", "tool"),
    ("running", "defer"): ("turn", "defer"),
    ("running", "stop"): ("turn", "hook"),
    **{(state, "user"): ("kill", state) for state in ("user", "tool", "defer", "hook")},
}
FOLLOWED: frozenset[State] = frozenset({"running", "tool", "defer", "hook"})  # still polled
AT_TURN_END: frozenset[State] = frozenset({"tool", "defer", "hook"})  # over once their turn ends


def step(state: State, given: Input) -> tuple[Action, State]:
    """What `given` does in `state`: a run already stopped stays as it stopped."""
    return TABLE.get((state, given), ("none", state))
