"""Which caliban session each run uses: Claude Code's session options emulated (spec §4).

caliban keeps a conversation as `<sessions-dir>/<name>.json`; `--session NAME` loads or creates
it and saves it after the run. The Claude Code session id the app sees is that name, a UUID as
Claude Code's (an app's `session_id`/`resume` is often its user's input: never a path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid

from translator.shim import history
from translator.shim.argfiles import ArgFiles
from translator.shim.entries import entries
from translator.shim.flags import ClaudeArgs
from translator.shim.place import Place
from translator.transcripts.files import session_path


def sessions_dir(place: Place) -> str:
    """Where caliban keeps sessions: CALIBAN_SESSIONS_DIR (also passed on as --sessions-dir),
    else caliban's default, `$XDG_DATA_HOME/caliban/sessions`. (Paths as strings: pathlib
    would cost every start ~3 ms.)"""
    explicit = place.env.get("CALIBAN_SESSIONS_DIR")
    if explicit:
        return place.path(explicit)
    data = place.env.get("XDG_DATA_HOME") or os.path.join(place.home(), ".local", "share")
    return os.path.join(place.path(data), "caliban", "sessions")


def config_dir(place: Place) -> str:
    """Where Claude Code keeps its files: CLAUDE_CONFIG_DIR, else `~/.claude`."""
    return place.path(place.env.get("CLAUDE_CONFIG_DIR") or os.path.join(place.home(), ".claude"))


def transcript_path(place: Place, session_id: str) -> str:
    """The session's Claude Code file, in the project folder of the session's folder."""
    return session_path(config_dir(place), place.cwd, session_id)


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_id(value: str) -> bool:
    """A session id as Claude Code takes one: a UUID written 8-4-4-4-12 (any version, any case)."""
    return _UUID.fullmatch(value) is not None


def refusal(args: ClaudeArgs, place: Place) -> str | None:
    """Claude Code's own line (2.1.332, `claude -p`; exit status 1) for session options it
    refuses, or None: an id that is no UUID (nor, for --resume, this folder's one session of
    that title), or a new id for a session resumed in place. A title found is put in `args`
    as its session's id, so that the session is the one checked here (looked up once)."""
    given, resume = args.get("--session-id"), args.get("--resume")
    if given is not None and not is_id(given):
        return "Error: Invalid session ID. Must be a valid UUID."
    if given is not None and (resume is not None or "--continue" in args.flags) and "--fork-session" not in args.flags:
        return "Error: --session-id with --continue or --resume also needs --fork-session."
    if given is not None and (os.path.exists(transcript_path(place, given))
                              or os.path.exists(_file(sessions_dir(place), given))):  # fmt: skip
        return f"Error: Session ID {given} is already in use."
    titled = titled_sessions(place, resume) if resume is not None and not is_id(resume) else []
    if len(titled) > 1:  # (the shim's line: which of them the CLI takes is not known)
        return (f'Error: --resume: {len(titled)} sessions of this folder are titled "{resume}"; '
                "resume one of them by its session ID.")  # fmt: skip
    if resume is not None and not is_id(resume) and not titled:
        return ("Error: --resume requires a valid session ID or session title when used with --print. Usage: "
                f'claude -p --resume <session-id|title>. Provided value "{resume}" is not a UUID and does not '
                "match any session title.")  # fmt: skip
    if titled:
        args.values["--resume"] = titled[0]
    return None


def missing(args: ClaudeArgs, place: Place) -> str | None:
    """Claude Code's line (2.1.332: on stderr, in a result's `errors` with stream-json; exit
    status 1) for `--resume` (forked or not) of a session with no file in this folder's project:
    never made here, or deleted (the SDKs' delete_session; caliban's own copy is left alone).
    After `refusal`: a title is its session's id by then."""
    resume = args.get("--resume")
    if resume is None or os.path.exists(transcript_path(place, resume)):
        return None
    return f"No conversation found with session ID: {resume}"


def titled_sessions(place: Place, title: str) -> list[str]:
    """The ids of this folder's sessions whose title is `title`: a session file's last
    `custom-title` line (the SDKs' rename_session appends one; the last wins, as for the CLI).
    Only the folder's own file names are opened, never a path made from `title`."""
    found = []
    for name in _project_sessions(place):
        title_now = None
        try:
            with open(os.path.join(_project_folder(place), f"{name}.jsonl"), "rb") as fh:
                for entry in entries(line for line in fh if b'"custom-title"' in line):
                    if entry.get("type") == "custom-title":
                        title_now = entry.get("customTitle")
        except OSError:
            continue
        if title_now == title:
            found.append(name)
    return found


def _project_folder(place: Place) -> str:
    """This folder's project folder, where Claude Code keeps its sessions' files."""
    return os.path.dirname(transcript_path(place, str(uuid.UUID(int=0))))


def _project_sessions(place: Place) -> list[str]:
    """The ids of this folder's session files, oldest first."""
    try:
        with os.scandir(_project_folder(place)) as entries:
            found = sorted((e.stat().st_mtime, e.name) for e in entries
                           if e.name.endswith(".jsonl") and is_id(e.name[: -len(".jsonl")]))  # fmt: skip
    except OSError:
        return []
    return [name.removesuffix(".jsonl") for _, name in found]


def _file(folder: str, name: str) -> str:
    """A session's file in `folder`: `name` is an id (is_id), so the path stays in the folder."""
    assert is_id(name), name
    return os.path.join(folder, f"{name}.json")


class Session:
    """The conversation's caliban session: its name, and the flags of the next run."""

    def __init__(self, args: ClaudeArgs, warnings: list[str], place: Place) -> None:
        """`args` passed `refusal` and `missing`: every id in them is a UUID (a title: its
        session's), a resumed one has its file. `place`: the session's environment and folder
        (its files are found from them)."""
        self.place = place
        self.dir = sessions_dir(place)
        self.forked_from: str | None = None  # the session a fork copied (its Claude Code file too)
        self.argfiles = ArgFiles()  # the runs' long flag values, in files
        resume, given = args.get("--resume"), args.get("--session-id")
        # --no-session-persistence: the runs share a session in a directory of their own,
        # removed at the end (caliban's --no-save would lose each message's turn for the next).
        self.scratch: str | None = None
        if "--no-session-persistence" in args.flags:
            import tempfile  # (only here: it is not cheap to import)

            self.scratch = tempfile.mkdtemp(prefix="caliban-claude-")
        continued = None
        if not resume and "--continue" in args.flags:
            continued = self._latest()
            if continued is None:
                warnings.append("--continue: no session of this folder to continue; starting a new one")
        self.new = not resume and continued is None  # not one resumed or continued
        self.resume_pending = bool(resume)  # the next run must find the session (--resume)
        source = resume or continued
        if source:
            self._seed(source, into_scratch="--fork-session" not in args.flags, warnings=warnings)
        if source and "--fork-session" in args.flags:
            self.forked_from = source
            self.id = self._fork(source, given or str(uuid.uuid4()), warnings)
        else:
            self.id = source or given or str(uuid.uuid4())
        if self.scratch is not None:
            self._copy_into_scratch()

    def args(self) -> list[str]:
        flags = ["--resume" if self.resume_pending else "--session", self.id]
        if self.scratch is not None:
            flags += ["--sessions-dir", self.scratch]
        elif self.place.env.get("CALIBAN_SESSIONS_DIR"):
            flags += ["--sessions-dir", self.dir]
        return flags

    def close(self) -> None:
        """The end of the conversation: a session that must not persist is removed, and so
        are the files its runs were given for values too long for a command line."""
        self.argfiles.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _seed(self, source: str, into_scratch: bool, warnings: list[str]) -> None:
        """A session that caliban does not have but whose Claude Code file is here (a copy, an
        SDK fork or session store's) is made caliban's from the file: the file says a session
        exists, as for Claude Code. One without persistence is made in its own directory."""
        if os.path.exists(_file(self.dir, source)):
            return
        folder = self.scratch if into_scratch and self.scratch is not None else self.dir
        dropped = history.seed(transcript_path(self.place, source), _file(folder, source), source)
        if dropped:
            warnings.append(f"session {source}: {dropped} content block(s) of its file have no caliban form "
                            "(redacted thinking, server tools, documents) and were left out of its history")

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
        """The session to continue: as Claude Code, this folder's newest (its project folder's
        newest session file), not the newest of any folder."""
        found = _project_sessions(self.place)
        return found[-1] if found else None

    def _fork(self, source: str, new: str, warnings: list[str]) -> str:
        """Copy the session under a new name (the name inside the file too, or caliban would
        save the fork over its source). The source has its session file (`missing` refused it
        otherwise) and so a caliban session (`_seed`); one that cannot be read is warned."""
        try:
            with open(_file(self.dir, source), encoding="utf-8") as fh:
                data = json.load(fh)
            data["name"] = new
            with open(_file(self.dir, new), "w", encoding="utf-8") as fh:
                json.dump(data, fh)
        except (OSError, ValueError, TypeError) as exc:
            warnings.append(f"--fork-session: cannot copy session {source!r} ({exc.__class__.__name__})")
        return new
