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
    from translator.telemetry.deferred import Deferred
    from translator.telemetry.exporter import Telemetry

ENABLE = "CLAUDE_CODE_ENABLE_TELEMETRY"
PREFIXES = ("CLAUDE_CODE_", "OTEL_")  # the variables a batch's workers are given
PACKAGES = {"http/json": "json.http", "http/protobuf": "proto.http", "grpc": "proto.grpc"}  # of the otel extra
_worker: tuple[int, Telemetry | None] | None = None  # a batch worker's exporter, made once per process


def enabled(environ: Mapping[str, str]) -> bool:
    """Claude Code's switch: `CLAUDE_CODE_ENABLE_TELEMETRY` set to a true value (DISABLE_TELEMETRY
    does not turn it off, as in the CLI)."""
    return environ.get(ENABLE, "").strip().lower() in {"1", "true", "yes", "on"}


def settings(environ: Mapping[str, str], terminal: str = "non-interactive", lasting: bool = True,
             formatted: bool = True) -> Settings | None:
    """What is to be exported, when telemetry is on and something is; what was asked and cannot
    be done is said here, one line each, even when nothing is left to export; the otel extra is
    looked for (not imported): a missing one raises extras.MissingExtra."""
    if not enabled(environ):
        return None
    found = Settings.read(environ, terminal, lasting, formatted)
    from translator.diagnostics import stderr

    for note in found.notes:
        stderr([f"translator: telemetry: {note}"], "warning")
    if not found.exports_anything:
        return None
    import importlib.util
    import logging

    sdk_log = logging.getLogger("opentelemetry")  # the SDK warns as it loads (a malformed OTEL_RESOURCE_ATTRIBUTES):
    sdk_log.propagate = False  # from before its import, its log lines go nowhere near stderr (exporter.Losses
    sdk_log.addHandler(logging.NullHandler())  # counts them once it is made)

    from translator.extras import MissingExtra, install

    modules = ["opentelemetry.sdk", *{"opentelemetry.exporter.otlp." + PACKAGES[s.protocol]
                                      for s in found.signals.values() if s.exporter == "otlp"}]
    for module in modules:
        try:
            missing = importlib.util.find_spec(module) is None
        except ModuleNotFoundError:
            missing = True
        if missing:
            raise MissingExtra(f"{module} is not installed: {install('otel')}")
    return found


def start(environ: Mapping[str, str], terminal: str = "non-interactive", lasting: bool = True) -> Telemetry | None:
    """The process's exporter, made now (the SDK imported here, only then), or None."""
    found = settings(environ, terminal, lasting)
    if found is None:
        return None
    from translator.telemetry.exporter import Telemetry

    return Telemetry(found)


def start_or_say(environ: Mapping[str, str], warn: Callable[[str], None], lasting: bool = True,
                 formatted: bool = True) -> Deferred | None:
    """The process's exporter, made on a thread of its own (a live stream's first frames do not
    wait for the SDK's import), or None; a missing otel extra said with `warn` (the command goes
    on without it). `lasting`: the process outlives its input (a scrape endpoint can be read);
    `formatted`: stdout is json or stream-json (no console exporter, as in Claude Code)."""
    from translator.extras import MissingExtra

    try:
        found = settings(environ, lasting=lasting, formatted=formatted)
    except MissingExtra as exc:
        warn(f"telemetry: {exc}; not exported")
        return None
    if found is None:
        return None
    from translator.telemetry.deferred import Deferred

    return Deferred(found)


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
            made = start(os.environ, lasting=False)  # (a scrape endpoint per worker: nobody knows where)
        except MissingExtra:
            made = None  # the command said it already, where it runs
        _worker = (os.getpid(), made)
    return _worker[1]
