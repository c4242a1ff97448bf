"""Which caliban session each run uses: Claude Code's session options emulated (spec §4).

caliban keeps a conversation as `<sessions-dir>/<name>.json`; `--session NAME` loads or creates
it and saves it after the run. The Claude Code session id the app sees is that name.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid

from translator.shim.argfiles import ArgFiles
from translator.shim.flags import ClaudeArgs


def sessions_dir() -> str:
    """Where caliban keeps sessions: CALIBAN_SESSIONS_DIR (also passed on as --sessions-dir),
    else caliban's default, `$XDG_DATA_HOME/caliban/sessions`. (Paths as strings: pathlib
    would cost every start ~3 ms.)"""
    explicit = os.environ.get("CALIBAN_SESSIONS_DIR")
    if explicit:
        return explicit
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "caliban", "sessions")


def _file(folder: str, name: str) -> str:
    return os.path.join(folder, f"{name}.json")


class Session:
    """The conversation's caliban session: its name, and the flags of the next run."""

    def __init__(self, args: ClaudeArgs, warnings: list[str]) -> None:
        self.dir = sessions_dir()
        self.resume_pending = False  # the next run must find the session (--resume)
        self.argfiles = ArgFiles()  # the runs' long flag values, in files
        # --no-session-persistence: the runs share a session in a directory of their own,
        # removed at the end (caliban's --no-save would lose each message's turn for the next).
        self.scratch: str | None = None
        if "--no-session-persistence" in args.flags:
            import tempfile  # (only here: it is not cheap to import)

            self.scratch = tempfile.mkdtemp(prefix="caliban-claude-")
        resume, given = args.get("--resume"), args.get("--session-id")
        self.new = not resume and "--continue" not in args.flags  # not one resumed or continued
        if resume:
            self.id = resume
            self.resume_pending = True
            if "--fork-session" in args.flags:
                self.id = self._fork(resume, given or str(uuid.uuid4()), warnings)
        elif "--continue" in args.flags:
            latest = self._latest()
            if latest is None:
                warnings.append("--continue: no caliban session to continue; starting a new one")
            self.id = latest or given or str(uuid.uuid4())
        else:
            self.id = given or str(uuid.uuid4())
        if self.scratch is not None:
            self._copy_into_scratch()

    def args(self) -> list[str]:
        flags = ["--resume" if self.resume_pending else "--session", self.id]
        if self.scratch is not None:
            flags += ["--sessions-dir", self.scratch]
        elif os.environ.get("CALIBAN_SESSIONS_DIR"):
            flags += ["--sessions-dir", self.dir]
        return flags

    def close(self) -> None:
        """The end of the conversation: a session that must not persist is removed, and so
        are the files its runs were given for values too long for a command line."""
        self.argfiles.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _copy_into_scratch(self) -> None:
        """A session resumed without persistence is read from the store, never written back."""
        assert self.scratch is not None
        source = _file(self.dir, self.id)
        if os.path.exists(source):
            shutil.copyfile(source, _file(self.scratch, self.id))

    def ran(self, got_result: bool) -> None:
        """A run ended. Once caliban got past loading the session, later runs just continue it."""
        if got_result:
            self.resume_pending = False

    def _latest(self) -> str | None:
        try:
            with os.scandir(self.dir) as entries:
                found = sorted((e.stat().st_mtime, e.name) for e in entries if e.name.endswith(".json"))
        except OSError:
            return None
        return found[-1][1].removesuffix(".json") if found else None

    def _fork(self, source: str, new: str, warnings: list[str]) -> str:
        """Copy the session under a new name (the name inside the file too, or caliban would
        save the fork over its source). A missing source stays missing: --resume reports it."""
        try:
            with open(_file(self.dir, source), encoding="utf-8") as fh:
                data = json.load(fh)
            data["name"] = new
            with open(_file(self.dir, new), "w", encoding="utf-8") as fh:
                json.dump(data, fh)
        except (OSError, ValueError, TypeError) as exc:
            warnings.append(f"--fork-session: cannot copy session {source!r} ({exc.__class__.__name__})")
        return new
