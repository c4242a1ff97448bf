"""The shim's diagnostics: one line each on stderr, named for the command (the SDK hands them
to `options.stderr`)."""

from __future__ import annotations

from translator.diagnostics import stderr

PROG = "caliban-claude"


def say(line: str) -> None:
    """A line on stderr; a closed, full or missing stderr is no reason to fail."""
    stderr([f"{PROG}: {line}"])


def warn(message: str) -> None:
    say(f"warning: {message}")
