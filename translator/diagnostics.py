"""Diagnostics: what a report on a bad line (or a recovery) holds, and stderr, where reports go
(stdout carries data only). Text is the default; `--log-format json` writes one JSON object per
line for log shippers. Either way a report quotes at most the first 80 bytes of the line it is
about (a recovery quotes none)."""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any

import orjson

from translator.exits import EX_IOERR

STUCK_S = 5.0  # how long a full stderr may keep a diagnostic waiting before it is dropped

# The fixed set of reasons a line is rejected for (the `reason` label of the bad-lines metric).
KINDS = ("invalid_utf8", "invalid_json", "not_an_event", "malformed_event", "too_long", "untranslatable")
_json = False
_quiet = False  # --quiet: errors only
# Control characters (C0, DEL, C1) as \xNN: a bad line's bytes must not drive the terminal.
ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def escaped(text: str) -> str:
    return text.translate(ESCAPES)


class Diagnostic(str):
    """A report on one input line. It is its text line (so it prints, joins and compares as
    any other diagnostic does) and carries its fields for JSON logs and metrics."""

    source: str
    line: int
    reason: str
    excerpt: str

    def __new__(cls, source: str, line: int, reason: str, excerpt: str) -> Diagnostic:
        source, reason, excerpt = escaped(source), escaped(reason), escaped(excerpt)
        self = super().__new__(cls, f"translator: {source}:{line}: {reason}: {excerpt}")
        self.source, self.line, self.reason, self.excerpt = source, line, reason, excerpt
        return self

    def __reduce__(self) -> tuple[type[Diagnostic], tuple[str, int, str, str]]:
        return Diagnostic, (self.source, self.line, self.reason, self.excerpt)  # batch workers send these

    @property
    def kind(self) -> str:
        """Which of KINDS the reason is."""
        reason = self.reason
        if reason == "invalid UTF-8":
            return "invalid_utf8"
        if reason.startswith("invalid JSON"):
            return "invalid_json"
        if reason.startswith("line longer than"):
            return "too_long"
        if reason.startswith("cannot be translated"):
            return "untranslatable"
        if reason in ("not a JSON object", "no 'type' key", "'type' is not a string"):
            return "not_an_event"
        return "malformed_event"


class Notice(str):
    """What the fold says about a recovery move (core/states.py) at one input line: a lost `RunEnd`,
    an input cut off inside a run, a retried turn. Not a bad line: nothing is rejected or
    counted, and it changes no exit status. Its `level` is its own (warning or info)."""

    source: str
    line: int
    kind: str
    message: str
    level: str

    def __new__(cls, source: str, line: int, kind: str, message: str, level: str) -> Notice:
        source = escaped(source)
        self = super().__new__(cls, f"translator: {source}:{line}: {level}: {message}")
        self.source, self.line, self.kind, self.message, self.level = source, line, kind, message, level
        return self

    def __reduce__(self) -> tuple[type[Notice], tuple[str, int, str, str, str]]:
        return Notice, (self.source, self.line, self.kind, self.message, self.level)  # batch workers send these


def once(lines: list[str], said: set[str]) -> list[str]:
    """The reports not to hold back: every report on a line (each its own), and a warning about
    no line (a model without a rate, which each input's fold gives) only the first time it comes
    in a command's run; `said` keeps those."""
    fresh = [line for line in lines if isinstance(line, (Diagnostic, Notice)) or line not in said]
    said.update(line for line in fresh if not isinstance(line, (Diagnostic, Notice)))
    return fresh


def use_quiet() -> None:
    """From now on, only errors are said (`--quiet`): no reports of bad lines, no notices."""
    global _quiet
    _quiet = True


def quiet() -> bool:
    """Whether only errors are said (a batch draws no bar and prints no progress then)."""
    return _quiet


def use_json() -> None:
    """From now on, diagnostics are JSON lines (`--log-format json`)."""
    global _json
    _json = True


def as_json(line: str, level: str, now: float) -> bytes:
    """One diagnostic as a JSON line: time, level, then the report's fields (or its message)."""
    record: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
        "level": line.level if isinstance(line, Notice) else level,
    }
    if isinstance(line, Notice):
        record |= {"source": line.source, "line": line.line, "kind": line.kind, "message": line.message}
    elif isinstance(line, Diagnostic):
        record |= {"source": line.source, "line": line.line, "reason": line.reason, "kind": line.kind,
                   "excerpt": line.excerpt}
    else:
        record["message"] = line.removeprefix("translator: ")
    return orjson.dumps(record) + b"\n"


def stderr(lines: list[str], level: str = "error") -> None:
    """Write diagnostic lines; a closed (`2>&-`: no sys.stderr at all), full or broken stderr
    is not worth dying for. `level` (error, warning, info) shows only in JSON."""
    stream = sys.stderr
    if _quiet:
        lines = [line for line in lines if (line.level if isinstance(line, Notice) else level) == "error"]
    if stream is None or not lines:
        return
    text = formatted(lines, level)
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # not a file (a test's capture): its own write
        fd = -1
    try:
        stream.flush()
        if fd < 0:
            stream.write(text)
            stream.flush()
        else:
            _write_all(fd, text.encode(stream.encoding or "utf-8", "backslashreplace"))
    except (OSError, ValueError):
        pass


def stdout_text(text: str, prog: str = "translator") -> int:
    """A command's text on stdout (help, version, a completion script), and the exit status:
    written to fd 1 at once, so that a failed write is seen (argparse swallows it, exit 0). A
    closed pipe ends quietly (0); any other failure (a full disk, stdout closed) is one line and
    74, as on the data path."""
    try:
        _write_all(1, text.encode())
    except BrokenPipeError:
        return 0
    except OSError as exc:
        stderr([f"{prog}: write error: {exc.strerror}"])
        return EX_IOERR
    return 0


def _write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd`, waiting while it is full: stderr shares stdout's pipe under
    `2>&1`, which the shells make non-blocking, and a slow consumer must not cost diagnostics.
    A consumer that takes nothing for STUCK_S loses the rest of them (never the run)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            if not select.select([], [fd], [], STUCK_S)[1]:
                return


def formatted(lines: list[str], level: str) -> str:
    """Diagnostic lines as they are written: escaped text, or JSON lines."""
    if _json:
        now = time.time()
        return b"".join(as_json(line, level, now) for line in lines).decode()
    return "".join(escaped(line) + "\n" for line in lines)
