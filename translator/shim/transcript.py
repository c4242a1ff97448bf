"""The session's file where Claude Code keeps it, for the apps and tools that read it (the SDKs'
list_sessions/get_session_messages, ccusage): `$CLAUDE_CONFIG_DIR` (default `~/.claude`)
`/projects/<slug of the cwd>/<session id>.jsonl`, appended as the frames go out. A resumed
session goes on in its file, its first new line after the file's last whole one; a fork's file
starts with a copy of its source's conversation, as Claude Code's; with
`--no-session-persistence` (the TS SDK's `persistSession: false`) there is none."""

from __future__ import annotations

import os

import orjson

from translator.shim.entries import entries
from translator.shim.place import Place
from translator.shim.say import warn
from translator.shim.sessions import Session, transcript_path
from translator.transcripts.files import Written, append
from translator.transcripts.lines import Transcript
from translator.version import __version__

TAIL = 1 << 20  # bytes read back from a resumed session's file to find its last line
# The lines of a conversation's chain, as the SDKs' readers walk it (an SDK fork's `custom-title`
# line has a uuid too, but a line chained to it would start a conversation of its own).
CHAINED = ("user", "assistant", "attachment", "system", "progress")


def last_uuid(path: str) -> str | None:
    """The uuid of the file's last line of its conversation (a resumed session's first line follows it)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(os.fstat(fh.fileno()).st_size - TAIL, 0))
            tail = fh.read()
    except OSError:
        return None
    for entry in entries(reversed(tail.splitlines())):  # (a cut line: the tail's first, or a crash's last)
        if isinstance(entry.get("uuid"), str) and entry.get("type") in CHAINED and not entry.get("isSidechain"):
            return str(entry["uuid"])
    return None


def git_branch(cwd: str) -> str:
    """The `gitBranch` Claude Code writes on every line: the branch HEAD names in the repository
    around `cwd` (an unborn one too), `HEAD` when it is detached or there is no repository."""
    folder = os.path.normpath(cwd)  # (absolute: a Place's)
    while True:
        dot = os.path.join(folder, ".git")
        try:
            if os.path.isfile(dot):  # a worktree's or submodule's: `gitdir: PATH`
                with open(dot, encoding="utf-8", errors="replace") as fh:
                    dot = os.path.join(folder, fh.read().strip().removeprefix("gitdir:").strip())
            if os.path.isdir(dot):
                with open(os.path.join(dot, "HEAD"), encoding="utf-8", errors="replace") as fh:
                    head = fh.read().strip()
                return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else "HEAD"
        except OSError:
            return "HEAD"
        parent = os.path.dirname(folder)
        if parent == folder:
            return "HEAD"
        folder = parent


def repair(path: str) -> None:
    """A file whose last line was cut (a crash mid-write) made to end on a whole line before
    more is appended, or the first new line would be lost with the fragment: the fragment goes
    (a last line that is whole JSON only gets its newline)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # none yet (or none to repair: appending reports what is wrong)
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = max(size - TAIL, 0)
        tail = os.pread(fd, size - start, start)
        cut = tail.rfind(b"\n")
        try:
            orjson.loads(tail[cut + 1 :])
            whole = True
        except orjson.JSONDecodeError:
            whole = False
        if whole or (cut < 0 and start > 0):  # (a fragment longer than the tail: left, ended)
            os.pwrite(fd, b"\n", size)
        else:
            os.ftruncate(fd, start + cut + 1)
    finally:
        os.close(fd)


def fork_copy(place: Place, source: str, session_id: str, path: str) -> None:
    """A fork's file begins as Claude Code begins it: its source's conversation lines, each
    with the fork's `sessionId`, an assistant's with `requestSessionId` (the source's id) at its
    end; the source's other lines (queue, cost and prompt records) are not copied. A new file,
    never one that is there."""
    try:
        with open(transcript_path(place, source), "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return  # nothing to copy: the fork starts empty
    copied = []
    for entry in entries(lines):
        if not isinstance(entry.get("uuid"), str):
            continue
        entry["sessionId"] = session_id
        if entry.get("type") == "assistant":
            entry.pop("requestSessionId", None)
            entry["requestSessionId"] = source
        copied.append(orjson.dumps(entry) + b"\n")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        warn(f"--fork-session: cannot copy the session's transcript to {path}: {exc.strerror or exc}")
        return
    with open(fd, "wb") as fh:
        fh.write(b"".join(copied))


class SessionFile(Written):
    """The session's file, as an observer of its runs: where it is, and trouble writing it said once."""

    def __init__(self, place: Place, session_id: str, path: str) -> None:
        self.place, cwd = place, place.cwd
        self.path, self.failed = path, False
        transcript = Transcript(cwd=cwd, version=__version__, entrypoint="caliban-claude", session_id=session_id,
                                parent=last_uuid(path), git_branch=git_branch(cwd))  # fmt: skip
        super().__init__(transcript, self._append)

    def _append(self, _: Transcript, lines: list[bytes]) -> None:
        if self.failed:
            return
        try:
            append(self.path, lines)
        except OSError as exc:
            self.failed = True
            warn(f"cannot write the session's transcript {self.path}: {exc.strerror or exc}")

    def moved(self) -> None:
        """The session's folder has moved (a TS SDK claim, before any line is written): its
        file goes to that folder's project, its lines name it and its branch."""
        cwd = self.place.cwd
        self.path = transcript_path(self.place, str(self.transcript.session_id))
        self.transcript.cwd, self.transcript.git_branch = cwd, git_branch(cwd)
        self.transcript.leaf = last_uuid(self.path)


def open_transcript(session: Session) -> SessionFile | None:
    """The session's file, as an observer of its runs; None when the session must not persist."""
    if session.scratch is not None:
        return None
    path = transcript_path(session.place, session.id)
    if session.forked_from is not None:
        fork_copy(session.place, session.forked_from, session.id, path)
    repair(path)
    return SessionFile(session.place, session.id, path)
