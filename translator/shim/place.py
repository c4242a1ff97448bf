"""Where a session runs: its environment and its folder, as a process of its own would have
them. The command's entry point (main.py's `main`) gives the process's; a test serving sessions
in its own process gives each one its own (tests/support/support_inprocess.py). Nothing below
main.py reads `os.environ` or the process's folder, so two sessions side by side each see theirs,
and the caliban each starts is started with them (tests/shim/test_shim_place.py pins it)."""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass
class Place:
    """A session's environment and its folder (absolute). The folder is the session's, not the
    process's: a TS SDK claim moves it (claiming.py), and its runs and its files follow."""

    env: Mapping[str, str]
    cwd: str

    def home(self) -> str:
        """`~`: HOME, as the shell reads it; else the user's home in the password database."""
        return self.env.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir

    def path(self, given: str) -> str:
        """`given` as the session's process would open it: `~` expanded, relative to its folder."""
        if given == "~" or given.startswith("~/"):
            given = self.home() + given[1:]
        elif given.startswith("~"):  # ~user: that user's home, if there is one
            user, _, rest = given[1:].partition("/")
            with contextlib.suppress(KeyError):
                given = os.path.join(pwd.getpwnam(user).pw_dir, rest)
        return os.path.normpath(os.path.join(self.cwd, given))
