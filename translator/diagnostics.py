"""stderr, where diagnostics go: stdout carries data only."""

from __future__ import annotations

import sys


def stderr(lines: list[str]) -> None:
    """Write diagnostic lines; a closed or broken stderr is not worth dying for."""
    try:
        sys.stderr.write("".join(line + "\n" for line in lines))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
