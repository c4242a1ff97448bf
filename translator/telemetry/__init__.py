"""Claude Code's OpenTelemetry export, made from caliban's runs: the same metrics, log events
and spans (names, units, attributes, temporality) that the Claude Code CLI 2.1.333 sends, so a
dashboard built for Claude Code shows caliban's runs unchanged.

On only when `CLAUDE_CODE_ENABLE_TELEMETRY=1`, as in Claude Code; off, nothing of the
OpenTelemetry SDK is imported and no thread is started (this module imports only the settings).
It watches what the core produces through the observer hook (encoders/observed.py), from the
shells; it is never inside the core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from translator.telemetry.settings import Settings

if TYPE_CHECKING:
    from translator.telemetry.exporter import Telemetry

ENABLE = "CLAUDE_CODE_ENABLE_TELEMETRY"
PREFIXES = ("CLAUDE_CODE_", "OTEL_")  # the variables a batch's workers are given
_worker: tuple[int, Telemetry | None] | None = None  # a batch worker's exporter, made once per process


def enabled(environ: Mapping[str, str]) -> bool:
    """Claude Code's switch: `CLAUDE_CODE_ENABLE_TELEMETRY` set to a true value (DISABLE_TELEMETRY
    does not turn it off, as in the CLI)."""
    return environ.get(ENABLE, "").strip().lower() in {"1", "true", "yes", "on"}


def start(environ: Mapping[str, str], terminal: str = "non-interactive") -> Telemetry | None:
    """The process's exporter when telemetry is on and something is to be exported, else None.
    The SDK is imported here, only then; a missing extra raises extras.MissingExtra."""
    if not enabled(environ):
        return None
    settings = Settings.read(environ, terminal)
    if not settings.exports_anything:
        return None
    from translator.telemetry.exporter import Telemetry

    return Telemetry(settings)


def start_or_say(environ: Mapping[str, str], warn: Callable[[str], None]) -> Telemetry | None:
    """`start()`, a missing otel extra said with `warn` (the command goes on without it)."""
    from translator.extras import MissingExtra

    try:
        return start(environ)
    except MissingExtra as exc:
        warn(f"telemetry: {exc}; not exported")
        return None


def variables(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The telemetry's variables, for a batch's workers (--out-dir, a fleet): () when it is off."""
    if not enabled(environ):
        return ()
    return tuple(sorted((k, v) for k, v in environ.items() if k.startswith(PREFIXES)))


def for_worker(given: tuple[tuple[str, str], ...]) -> Telemetry | None:
    """The exporter of a batch worker (a pool's process or a cluster's), made once per process
    from the variables the command was given; the worker's own environment wins where it sets
    one (a node's collector), and the SDK's exporters read it from there."""
    global _worker
    if not given:
        return None
    if _worker is None or _worker[0] != os.getpid():
        for key, value in given:
            os.environ.setdefault(key, value)
        from translator.extras import MissingExtra

        try:
            made = start(os.environ)
        except MissingExtra:
            made = None  # the command said it already, where it runs
        _worker = (os.getpid(), made)
    return _worker[1]
