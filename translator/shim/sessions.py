"""Which caliban session each run uses: Claude Code's session options emulated (spec §4).

caliban keeps a conversation as `<sessions-dir>/<name>.json`; `--session NAME` loads or creates
it and saves it after the run. The Claude Code session id the app sees is that name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from translator.shim.flags import ClaudeArgs


def sessions_dir() -> Path:
    """Where caliban keeps sessions: CALIBAN_SESSIONS_DIR (also passed on as --sessions-dir),
    else caliban's default, `$XDG_DATA_HOME/caliban/sessions`."""
    explicit = os.environ.get("CALIBAN_SESSIONS_DIR")
    if explicit:
        return Path(explicit)
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "caliban" / "sessions"


class Session:
    """The conversation's caliban session: its name, and the flags of the next run."""

    def __init__(self, args: ClaudeArgs, warnings: list[str]) -> None:
        self.dir = sessions_dir()
        self.resume_pending = False  # the next run must find the session (--resume)
        # --no-session-persistence: the runs share a session in a directory of their own,
        # removed at the end (caliban's --no-save would lose each message's turn for the next).
        self.scratch: Path | None = None
        if "--no-session-persistence" in args.flags:
            self.scratch = Path(tempfile.mkdtemp(prefix="caliban-claude-"))
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
            flags += ["--sessions-dir", str(self.scratch)]
        elif os.environ.get("CALIBAN_SESSIONS_DIR"):
            flags += ["--sessions-dir", str(self.dir)]
        return flags

    def close(self) -> None:
        """The end of the conversation: a session that must not persist is removed."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _copy_into_scratch(self) -> None:
        """A session resumed without persistence is read from the store, never written back."""
        assert self.scratch is not None
        source = self.dir / f"{self.id}.json"
        if source.exists():
            shutil.copyfile(source, self.scratch / source.name)

    def ran(self, got_result: bool) -> None:
        """A run ended. Once caliban got past loading the session, later runs just continue it."""
        if got_result:
            self.resume_pending = False

    def _latest(self) -> str | None:
        try:
            found = sorted(self.dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return None
        return found[-1].stem if found else None

    def _fork(self, source: str, new: str, warnings: list[str]) -> str:
        """Copy the session under a new name (the name inside the file too, or caliban would
        save the fork over its source). A missing source stays missing: --resume reports it."""
        try:
            data = json.loads((self.dir / f"{source}.json").read_text(encoding="utf-8"))
            data["name"] = new
            (self.dir / f"{new}.json").write_text(json.dumps(data), encoding="utf-8")
        except (OSError, ValueError, TypeError) as exc:
            warnings.append(f"--fork-session: cannot copy session {source!r} ({exc.__class__.__name__})")
        return new
