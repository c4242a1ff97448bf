"""Where session files go and how they are written: `<config dir>/projects/<slug>/<session>.jsonl`,
the slug made from the session's cwd as Claude Code makes it. Each move's lines are appended
with one `write` on an `O_APPEND` descriptor, as they are made: a crash loses at most the line
being written, and a reader at the same time sees whole lines or a last one it skips. A log's
first lines of a translation replace the file whole (`renew`: its earlier lines out, its
session's other logs' kept)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Callable
from typing import Any

from translator.encoders import RunSummary
from translator.encoders.observed import MOVES, NAMESPACE, Hold, Observer, StreamId, plain
from translator.model import HeadlessFrame, ToolCallEnd, ToolCallStart, TurnEnd, TurnStart
from translator.transcripts.lines import Transcript

_UNSAFE = re.compile(r"[^a-zA-Z0-9]")
MAX_SLUG = 200  # past this Claude Code cuts the name and adds a hash of the path


def _js_hash(text: str) -> str:
    """The 32-bit string hash (base 36) the SDKs add to a cut slug."""
    h = 0
    for ch in text:
        h = ((h << 5) - h + ord(ch)) & 0xFFFFFFFF
    h = abs(h - (1 << 32) if h >= 1 << 31 else h)
    digits = ""
    while h:
        h, d = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return digits or "0"


def slug(cwd: str) -> str:
    """A project folder's name: the cwd with every character not a letter or digit made `-`."""
    name = _UNSAFE.sub("-", cwd)
    return name if len(name) <= MAX_SLUG else f"{name[:MAX_SLUG]}-{_js_hash(cwd)}"


def session_path(config_dir: str, cwd: str, session_id: str) -> str:
    """The session's file. An id is data (a log's own init, a client's): one that is no plain file
    name (`../x`, `/etc/x`) names its file by a uuid5 of it, so no path made of an id leaves its
    project folder."""
    name = session_id if plain(session_id) else str(uuid.uuid5(NAMESPACE, session_id))
    return os.path.join(config_dir, "projects", slug(cwd), f"{name}.jsonl")


def append(path: str, lines: list[bytes], fresh: bool = False) -> None:
    """The lines at the file's end in one write (`fresh`: the file emptied first, its folder made)."""
    if fresh or not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (os.O_TRUNC if fresh else 0)
    fd = os.open(path, flags, 0o600)
    try:
        data = memoryview(b"".join(lines))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def renew(path: str, lines: list[bytes], mark: str) -> None:
    """A log's first lines of this translation in its file: the lines of its earlier ones (each
    line of a log names ids that start with its `mark`) replaced, those of the session's other
    logs (a run and its resume, translated apart) kept. Written whole to a new file put in its
    place: a crash leaves the old file or the new one."""
    try:
        with open(path, "rb") as old:
            kept = [line for line in old if mark.encode() not in line and line.endswith(b"\n")]
    except FileNotFoundError:
        kept = []
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fresh = f"{path}.{os.getpid()}.tmp"
    try:
        append(fresh, [*kept, *lines], fresh=True)
        os.replace(fresh, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk leaves no half-written file beside the old one
            os.unlink(fresh)
        raise


class Written:
    """An observer: the moves to its transcript, and what they gave written to the file at once
    (a watch that must not hold up the frames keeps the moves until they are out: observed.Kept).
    `opens`: a log's transcript, which takes its folder and times from the stream it is told
    opens (the shim's knows its own). Trouble writing is said once on stderr and ends this
    session's file, never the stream."""

    timed = True
    takes = MOVES - {"tool_start", "tool_end"}

    def __init__(self, transcript: Transcript, write: Callable[[Transcript, list[bytes]], None],
                 opens: bool = False) -> None:  # fmt: skip
        self.transcript = transcript
        self._write = write
        self._opens = opens

    def _out(self) -> None:
        if lines := self.transcript.take():
            self._write(self.transcript, lines)

    def stream_open(self, stream: StreamId, t: float) -> None:
        if self._opens:
            self.transcript.session_id, self.transcript.cwd = stream.session_id, stream.cwd
            self.transcript.source = stream.source
            self.transcript.written_at = written_at(stream.source)

    def prompt(self, content: Any, t: float) -> None:
        """The next run's prompt, from the shell that has it (the shim)."""
        self.transcript.prompt(content, t)
        self._out()

    def interrupted(self, t: float) -> None:
        """The app interrupted the open run (the shim, from its control thread: a flag, no lines)."""
        self.transcript.interrupted()

    def run_start(self, model: str | None, t: float) -> None:
        self.transcript.run_start(model, t)

    def turn_start(self, ev: TurnStart, t: float) -> None:
        self.transcript.turn_start(ev, t)

    def tool_start(self, ev: ToolCallStart, t: float) -> None:
        pass  # (nothing of it is written)

    def tool_end(self, tool_use_id: str, name: str | None, input: Any, end: ToolCallEnd, t: float) -> None:
        pass  # (its result is written from TurnEnd's copy)

    def turn_end(self, ev: TurnEnd, model: str | None, cost: float, t: float) -> None:
        self.transcript.turn_end(ev, model, cost, t)
        self._out()

    def headless_frame(self, frame: HeadlessFrame, t: float) -> None:
        self.transcript.headless_frame(frame, t)
        self._out()

    def run_end(self, run: RunSummary, t: float) -> None:
        self.transcript.run_end(run, t)
        self._out()


def written_at(source: str) -> float | None:
    """A replayed file's modification time (its estimated times start there), or None."""
    try:
        return os.stat(source).st_mtime if "://" not in source and os.path.isfile(source) else None
    except OSError:
        return None


class Transcripts:
    """`--transcripts DIR`, a Watch: each input stream's runs as one session under DIR, named
    by the stream's one session id (a log's own, else its path's: a second translation of a
    log rewrites its own file; two logs are two sessions, whatever they hold). `deferred`:
    for the streaming shells, which drain it after each step's frames are out."""

    def __init__(self, config_dir: str, version: str, deferred: bool = False) -> None:
        self.config_dir = config_dir
        self.hold = Hold(waits=deferred)
        self.version = version
        self._written: set[tuple[str, str]] = set()  # the files and logs this process has begun (renew)
        self._failed: set[str] = set()
        self._paths: dict[tuple[str, str], str] = {}

    def observer(self) -> Observer:
        transcript = Transcript(cwd="", version=self.version, entrypoint="translator", from_log=True)
        return self.hold.keep(Written(transcript, self.write, opens=True))

    def drain(self) -> None:
        """What the streams' observers kept, done now: the shell has written the step's frames."""
        self.hold.drain()

    def write(self, transcript: Transcript, lines: list[bytes]) -> None:
        key = (transcript.cwd, str(transcript.session_id))
        path = self._paths.get(key)
        if path is None:
            self._paths[key] = path = session_path(self.config_dir, *key)
        if path in self._failed:
            return
        begun = (path, transcript.mark())
        try:
            if begun in self._written:
                append(path, lines)
            else:
                renew(path, lines, begun[1])
                self._written.add(begun)
        except OSError as exc:
            self._failed.add(path)
            sys.stderr.write(f"translator: --transcripts: {path}: {exc.strerror or exc}\n")
