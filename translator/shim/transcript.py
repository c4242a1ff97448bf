"""The session's file where Claude Code keeps it, for the apps and tools that read it (the SDKs'
list_sessions/get_session_messages, ccusage): `$CLAUDE_CONFIG_DIR` (default `~/.claude`)
`/projects/<slug of the cwd>/<session id>.jsonl`, appended as the frames go out. A resumed
session goes on in its file, its first new line after the file's last; with
`--no-session-persistence` (the TS SDK's `persistSession: false`) there is none."""

from __future__ import annotations

import os

import orjson

from translator.shim.say import warn
from translator.shim.sessions import Session
from translator.transcripts.files import Written, append, session_path
from translator.transcripts.lines import Transcript
from translator.version import __version__

TAIL = 1 << 20  # bytes read back from a resumed session's file to find its last line


def config_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")


def last_uuid(path: str) -> str | None:
    """The uuid of the file's last line that has one (a resumed session's first line follows it)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(os.fstat(fh.fileno()).st_size - TAIL, 0))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a cut line (the file's first in the tail, or a crash's last)
        if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) and not entry.get("isSidechain"):
            return str(entry["uuid"])
    return None


def open_transcript(session: Session) -> Written | None:
    """The session's file, as an observer of its runs; None when the session must not persist."""
    if session.scratch is not None:
        return None
    cwd = os.getcwd()
    path = session_path(config_dir(), cwd, session.id)
    transcript = Transcript(cwd=cwd, version=__version__, entrypoint="caliban-claude", session_id=session.id,
                            parent=last_uuid(path))  # fmt: skip
    failed: list[str] = []

    def write(_: Transcript, lines: list[bytes]) -> None:
        if failed:
            return
        try:
            append(path, lines)
        except OSError as exc:
            failed.append(path)
            warn(f"cannot write the session's transcript {path}: {exc.strerror or exc}")

    return Written(transcript, write)
