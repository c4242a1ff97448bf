"""Whether a tool call runs, for both backends: the session's mode and rules (policy.py), the
app's hook callbacks (hooks.py) and what their outputs say beyond a decision (outputs.py), and
the gate that asks them and the app's `can_use_tool` in Claude Code's order (gate.py)."""
