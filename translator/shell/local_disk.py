"""Local disk as a batch's store: inputs read in place, outputs committed whole (a temporary
beside the target, on disk before it is renamed over it), and the one walk of an output
directory that clears a killed run's temporaries and finds the up-to-date markers.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from translator.shell.selection import Found

TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")  # `.<output name>.<pid>.tmp`


class LocalStore:
    """Local disk: inputs read directly, outputs written to a temporary file beside the
    target and renamed over it once on disk, so a crash never leaves half an output."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, str, int]] | None = None  # inside together(): (temporary, target, device)

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
        return Found(path, st.st_size, st.st_mtime)

    def files_under(self, path: str) -> list[Found]:
        return [self.stat(str(p)) for p in Path(path).rglob("*") if p.is_file()]

    def glob(self, pattern: str) -> list[Found]:
        import glob

        return [self.stat(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]

    @contextmanager
    def open_input(self, path: str) -> Iterator[BinaryIO]:
        with open(path, "rb") as f:
            yield f

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
                else:
                    self._staged.append((tmp, path, os.fstat(out.fileno()).st_dev))
            if self._staged is None:
                os.replace(tmp, path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise

    @contextmanager
    def together(self) -> Iterator[dict[str, OSError]]:
        """One sync of each disk the temporaries are on, then the renames (a sync per file
        cost ~1 ms, more than a small log's translation)."""
        failed: dict[str, OSError] = {}
        staged: list[tuple[str, str, int]] = []
        self._staged = staged
        try:
            yield failed
        except BaseException:
            for tmp, _, _ in staged:
                with suppress(OSError):
                    os.unlink(tmp)
            raise
        finally:
            self._staged = None
        try:
            _sync({device: tmp for tmp, _, device in staged})
        except OSError as exc:
            failed.update((target, exc) for _, target, _ in staged)
        for tmp, target, _ in staged:
            try:
                if target not in failed:
                    os.replace(tmp, target)
            except OSError as exc:
                failed[target] = exc
            if target in failed:
                with suppress(OSError):
                    os.unlink(tmp)

    def read_marker(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    def write_marker(self, path: str, data: bytes) -> None:
        """In place, not synced: a marker cut short is not JSON, and one lost in a crash, like
        that, only makes its (synced) output be redone."""
        with open(path, "wb") as out:
            out.write(data)


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


def sweep_temporaries(out_dir: str) -> set[str]:
    """Remove the temporaries of writers that are gone (killed, or a lost machine's pid that
    is not alive here; a live writer's are left alone); the up-to-date markers found on the
    same walk of the output, so that a file with none is known stale without a look of its own."""
    markers: set[str] = set()
    for entry in _hidden(out_dir.rstrip("/") or "/"):
        if entry.name.endswith(".done"):
            markers.add(entry.path)
        elif (match := TEMPORARY.match(entry.name)) is not None and not _alive(int(match.group(1))):
            with suppress(OSError):
                os.unlink(entry.path)
    return markers


def _hidden(top: str) -> Iterator[os.DirEntry[str]]:
    """The hidden files under `top` (markers, temporaries), folder by folder."""
    folders = [top]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif entry.name.startswith("."):
                        yield entry
        except OSError:  # gone or unreadable: its files are found stale (and redone), no more
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != 0
