"""An output directory's outputs and records for the up-to-date check, its folders walked only
when a run may have left a temporary there.

The walk (local_disk.sweep_temporaries: every folder of the output directory, a million at a
million sessions) was half of an unchanged rerun's work, and it is needed only to remove the
temporaries of a run that did not end (killed, or its machine lost). A run marks the records
folder while it writes (`running-<pid>`) and removes its mark when it ends; the walk is made
when a mark of a run that is gone is there (or one of this pid: a container's earlier run), or
when no walk was ever made of this folder (`swept`: the first run, or a folder of an earlier
version, whose own marks the walk also clears; a first run, made the folder, marks it as it
ends). Otherwise the records are the records folder's
files, and an output is looked up on disk when the check asks for it: a stat, not a walk.
"""

from __future__ import annotations

import os
from collections.abc import Container
from contextlib import suppress

from translator.shell.ledger import FOLDER, is_record
from translator.shell.local_disk import sweep_temporaries
from translator.shell.scratch import Names

RUNNING = "running-"  # a run's mark, then its pid
SWEPT = "swept"


class OnDisk(Container[str]):
    """The output files there are, each looked up when asked (a stat); the last answer kept, as
    the up-to-date check asks of one output twice (its owner, then whether it is recorded)."""

    def __init__(self) -> None:
        self._last = ("", False)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        if path != self._last[0]:
            self._last = (path, os.path.isfile(path))
        return self._last[1]


def gone(pid: int) -> bool:
    """Whether the run of `pid` has ended: not running, a zombie, or this very process (a mark of
    our own pid is an earlier run's)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except ProcessLookupError:
        return True
    except OSError:
        return False


def listed(out_dir: str) -> tuple[Names | OnDisk, list[str]]:
    """The output files (walked, or looked up one at a time) and the record files; this run's mark
    left in the records folder (ended: `ran`)."""
    folder = os.path.join(out_dir, FOLDER)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:  # a first run (walked: nothing, or an earlier version's outputs); marked as it ends
        return sweep_temporaries(out_dir)
    stale = [n for n in names if n.startswith(RUNNING) and n[len(RUNNING):].isdigit() and gone(int(n[len(RUNNING):]))]
    outputs: Names | OnDisk
    if SWEPT in names and not stale:
        outputs, paths = OnDisk(), [os.path.join(folder, n) for n in names if is_record(n)]
    else:
        outputs, paths = sweep_temporaries(out_dir)
        for name in stale:
            with suppress(OSError):
                os.unlink(os.path.join(folder, name))
    for name in (SWEPT, f"{RUNNING}{os.getpid()}"):
        with open(os.path.join(folder, name), "ab"):
            pass
    return outputs, paths


def ran(out_dir: str) -> None:
    """This run's mark removed: it has ended, its temporaries gone with it; a first run that made
    the records folder marks it walked (a run killed before its end leaves no such mark)."""
    folder = os.path.join(out_dir, FOLDER)
    with suppress(OSError):
        os.unlink(os.path.join(folder, f"{RUNNING}{os.getpid()}"))
    if os.path.isdir(folder) and not os.path.exists(os.path.join(folder, SWEPT)):
        with suppress(OSError), open(os.path.join(folder, SWEPT), "ab"):
            pass
