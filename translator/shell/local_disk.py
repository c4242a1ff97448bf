"""Local disk as a batch's store: inputs read in place, outputs committed whole (a temporary
beside the target, on disk before it is renamed over it), a chunk's up-to-date record written
around their commit (ledger.py), the page cache let go of by a batch that streams more than it
would keep (streamed), and the one walk of an output directory that clears a killed run's
temporaries and finds its outputs and records.
"""

from __future__ import annotations

import ctypes
import fcntl
import fnmatch
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO

from translator.api import FORMATS
from translator.shell import ledger
from translator.shell.ledger import FOLDER, Lazy, is_record
from translator.shell.scratch import Names
from translator.shell.selection import WILDCARD, Found

# What a run can have made, and so all the sweep may remove: an output's name is always
# `<stem>.<format>.jsonl` (selection.target_name), a pid at most Linux's PID_MAX_LIMIT. A user's
# `.budget.2024.tmp` or `.notes.jsonl.done` is neither, and stays.
OUTPUT = rf"[^/]+\.(?:{'|'.join(FORMATS)})\.jsonl"
TEMPORARY = re.compile(rf"^\.{OUTPUT}\.([1-9]\d{{0,6}})\.tmp$")  # `.<output name>.<pid>.tmp`
MARKER = re.compile(rf"^\.({OUTPUT})\.done$")  # `.<output name>.done`: an earlier version's up-to-date marker
PID_MAX = 1 << 22
LOCK = ".lock"  # in the records' folder: commits one at a time, and the latest generation given


class LocalStore:
    """Local disk: inputs read directly, outputs written to a temporary file beside the
    target and renamed over it once on disk, so a crash never leaves half an output."""

    def __init__(self, forget: bool = False) -> None:
        self.forget = forget  # a batch that streams (streamed()): what it read or wrote let go of (_forget)
        self._staged: list[tuple[str, str, int]] | None = None  # inside together(): (temporary, target, device)
        self._stamped: dict[str, str] = {}  # a chunk's record -> its name at commit (ledger.restamp)

    def absolute(self, name: str) -> str:
        return os.path.abspath(name)

    def kind(self, path: str) -> str | None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None
        return "dir" if stat.S_ISDIR(mode) else "file"

    def stat(self, path: str) -> Found:
        st = os.stat(path)
        return Found(path, st.st_size, st.st_mtime, (st.st_dev, st.st_ino))

    def files_under(self, path: str) -> Iterator[Found]:
        """Every file under `path` (symbolic links to files too; not into linked folders: a link
        to `..` made one log 41 outputs, two such links a listing without end), as it is found:
        a scandir walk, one stat a file (rglob took three, and pathlib objects: a third of the
        planning of 16,000 small files)."""
        folders = [path]
        while folders:
            for entry in _entries(folders.pop()):
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif (found := _found(entry)) is not None:
                    yield found

    def glob(self, pattern: str) -> list[Found]:
        """The files `pattern` matches, as glob.glob(recursive=True) finds them (`*` and `**`
        skip hidden names) but into no linked folder, as files_under."""
        parts = pattern.split("/")
        fixed = next(n for n, part in enumerate(parts) if WILDCARD.search(part))
        found: list[Found] = []
        _match("/".join(parts[:fixed]) or "/", parts[fixed:], found)
        return list({f.path: f for f in found}.values())  # `**/**` reaches a file more than once

    @contextmanager
    def open_input(self, path: str) -> Iterator[BinaryIO]:
        with open(path, "rb") as f:
            try:
                yield f
            finally:
                if self.forget:
                    _forget(f.fileno())

    @contextmanager
    def writer(self, path: str) -> Iterator[BinaryIO]:
        head, _, name = path.rpartition("/")
        tmp = f"{head}/.{name}.{os.getpid()}.tmp" if head else f".{name}.{os.getpid()}.tmp"
        try:
            out = open(tmp, "wb")  # noqa: SIM115 (closed below, before the commit)
        except FileNotFoundError:  # its folder is new: made on demand, not asked of every file
            os.makedirs(head or ".", exist_ok=True)
            out = open(tmp, "wb")  # noqa: SIM115
        try:
            with out:
                yield out
                out.flush()
                if self._staged is None:
                    os.fsync(out.fileno())
                    if self.forget:
                        _forget(out.fileno())
                else:
                    self._staged.append((tmp, path, os.fstat(out.fileno()).st_dev))
            if self._staged is None:
                os.replace(tmp, path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise

    @contextmanager
    def together(self, record: str | None = None, head: bytes = b"") -> Iterator[dict[str, OSError]]:
        """After the block, under the output folder's lock: the chunk's record named for this
        moment (ledger.restamp) and its head written (raises OSError if it cannot be: then
        nothing is committed), one sync of each disk the temporaries and the record are on,
        then the renames (a sync per file cost ~1 ms, more than a small log's translation). So
        records are in the order of the commits, whichever run made them."""
        failed: dict[str, OSError] = {}
        staged: list[tuple[str, str, int]] = []
        self._staged = staged
        self._stamped.clear()  # the last chunk's, if it committed nothing
        try:
            yield failed
        except BaseException:
            _discard(staged)
            raise
        finally:
            self._staged = None
        with _committing(record) as stamped:
            disks: dict[int, str] = {}
            if stamped is not None:
                try:
                    with open(stamped, "wb") as out:
                        out.write(head)
                        disks[os.fstat(out.fileno()).st_dev] = stamped
                except OSError:
                    _discard(staged)
                    raise
                self._stamped[str(record)] = stamped
            try:
                _sync(disks | {device: tmp for tmp, _, device in staged})
            except OSError as exc:
                failed.update((target, exc) for _, target, _ in staged)
            for tmp, target, _ in staged:
                try:
                    if target not in failed:
                        if self.forget:
                            _forget_file(tmp)
                        os.replace(tmp, target)
                except OSError as exc:
                    failed[target] = exc
                if target in failed:
                    with suppress(OSError):
                        os.unlink(tmp)

    def close_record(self, record: str, head: bytes, tail: bytes) -> None:
        """The entries of the outputs committed, after the head (not synced: entries lost in a
        crash only make their files be redone)."""
        with open(self._stamped.pop(record, record), "ab") as out:
            out.write(tail)

    def read_records(self, paths: list[str]) -> dict[str, bytes]:
        """The record files' bytes (raises OSError if one cannot be read)."""
        found = {}
        for path in paths:
            with open(path, "rb") as f:
                found[path] = f.read()
        return found

    def records(self, paths: list[str]) -> Lazy:
        """The record files, read when looked up (OSError then if one cannot be)."""
        return Lazy(paths, self.read_records, batch=2)

    def remove(self, paths: list[str]) -> None:
        for path in paths:
            with suppress(OSError):
                os.unlink(path)


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (PermissionError, FileNotFoundError, NotADirectoryError):  # unreadable (rglob skips it too), or gone
        return []


def _found(entry: os.DirEntry[str]) -> Found | None:
    """A file of a listing, as an input; a link that cannot be followed (a loop) is one too, one
    that fails when read (it failed the whole batch, 70); a dangling link or a file gone since
    the listing is none."""
    try:
        if not entry.is_file():
            return None
        st = entry.stat()
    except FileNotFoundError:
        return None
    except OSError:
        return Found(entry.path, 0, 0.0)
    return Found(entry.path, st.st_size, st.st_mtime, (st.st_dev, st.st_ino), entry.is_symlink())


def _add(entry: os.DirEntry[str], found: list[Found]) -> None:
    if (file := _found(entry)) is not None:
        found.append(file)


def _match(folder: str, parts: list[str], found: list[Found]) -> None:
    """The files under `folder` that match the glob components `parts`."""
    part, rest = parts[0], parts[1:]
    entries = _entries(folder)
    if part == "**":
        if rest:
            _match(folder, rest, found)
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                _match(entry.path, parts, found)
            elif not rest:
                _add(entry, found)
        return
    for entry in entries:
        if not fnmatch.fnmatchcase(entry.name, part) or (entry.name.startswith(".") and not part.startswith(".")):
            continue
        if rest and entry.is_dir(follow_symlinks=False):
            _match(entry.path, rest, found)
        elif not rest and not entry.is_dir(follow_symlinks=False):
            _add(entry, found)


def streamed(total: int) -> bool:
    """Whether a batch that reads `total` bytes streams more than the page cache would keep (half
    the machine's memory): its logs and outputs are then let go of as they are done (_forget). A
    million sessions' replay put 27 GB through a 24 GB page cache and pushed out the file
    system's metadata, which the next rerun's up-to-date check reads again (its unchanged rerun
    145 s after the replay, 65 s after another rerun); a smaller batch's pages are kept for the
    next run. PostgreSQL's large sequential scans take a small ring of buffers, for this reason."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # not known here: kept, as the kernel would
        return False
    return total > memory // 2


def _forget(fd: int) -> None:
    """A file read or written once, and on disk, let go of by the page cache (a dirty page stays;
    a system with no posix_fadvise, macOS, keeps it)."""
    with suppress(OSError, AttributeError):  # a pipe or a device: nothing cached to give back
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _forget_file(path: str) -> None:
    """As _forget, for a staged output: only once synced are its pages clean, and so dropped."""
    with suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            _forget(fd)
        finally:
            os.close(fd)


def _discard(staged: list[tuple[str, str, int]]) -> None:
    for tmp, _, _ in staged:
        with suppress(OSError):
            os.unlink(tmp)


@contextmanager
def _committing(record: str | None) -> Iterator[str | None]:
    """The output folder's commits one at a time (an flock on `.translator.done/.lock`, which
    holds the latest generation given): the record's name at this commit, after every other."""
    if record is None:
        yield None
        return
    lock = f"{os.path.dirname(record)}/{LOCK}"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(record), exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        said = os.pread(fd, 64, 0).strip()
        stamped = ledger.restamp(record, time.time_ns(), int(said) if said.isdigit() else 0)
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamped.rpartition("/")[2].split("-", 1)[0].encode(), 0)
        yield stamped
    finally:
        os.close(fd)


def _sync(files: dict[int, str]) -> None:
    """Everything written to the disks (st_dev) these files are on reaches them: Linux's
    syncfs(2), once per disk; elsewhere a sync of the whole system."""
    for path in files.values():
        fd = os.open(path, os.O_RDONLY)
        try:
            if _SYNCFS is not None:
                if _SYNCFS(fd) != 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            else:
                os.sync()
        finally:
            os.close(fd)


def _syncfs() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_SYNCFS = _syncfs()


def sweep_temporaries(out_dir: str) -> tuple[Names, list[str]]:
    """Remove the temporaries of writers that are gone (killed, or a lost machine's pid that
    is not alive here; a live writer's are left alone); the output files (on disk: scratch.py)
    and the up-to-date records found on the same walk, so that no file needs a look of its own."""
    outputs = Names()
    records: list[str] = []
    markers: list[tuple[str, str]] = []
    top = out_dir.rstrip("/") or "/"
    for entry in _files(top):
        if (match := TEMPORARY.match(entry.name)) is not None and int(match.group(1)) <= PID_MAX:
            if not _alive(int(match.group(1))):
                with suppress(OSError):
                    os.unlink(entry.path)
        elif is_record(entry.name) and os.path.basename(os.path.dirname(entry.path)) == FOLDER:
            records.append(entry.path)
        else:
            outputs.add(entry.path)
            if (found := MARKER.match(entry.name)) is not None:
                markers.append((entry.path, os.path.join(os.path.dirname(entry.path), found.group(1))))
    for marker, output in markers:  # an earlier version's, beside its output: records hold that now
        if output in outputs:
            outputs.discard(marker)
            with suppress(OSError):
                os.unlink(marker)
    return outputs, records


def _files(top: str) -> Iterator[os.DirEntry[str]]:
    """The files under `top`, folder by folder."""
    folders = [top]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    else:
                        yield entry
        except OSError:  # gone or unreadable: its files are found stale (and redone), no more
            continue


def _alive(pid: int) -> bool:
    """Whether a writer is running: a zombie is not (a killed batch's workers stay zombies until
    their new parent reaps them, which an init may be slow to do: their temporaries were kept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:  # no /proc (not Linux): alive as far as is known
        return True
