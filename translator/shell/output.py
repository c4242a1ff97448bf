"""`-o/--output FILE`: where the frames go instead of stdout.

A regular file (or a new one) is written atomically: the frames go to a temporary file beside
it, which replaces FILE only once everything is written and synced, so a reader never sees half
an output and a failed run leaves the old FILE as it was. Anything else (a FIFO, a device, a
symbolic link, such as /dev/stdout) is written in place, as a shell redirection would; a
regular file so written (with --follow, or through a link) is emptied only by the first write
(the shell's `Stdout`), so a run that fails before its first frame leaves it as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from translator import stdio


class OutputFile:
    def __init__(self, path: str, atomic: bool) -> None:
        """Open it (or its temporary file); raises OSError as the OS says why not."""
        if stdio.names_held(path):  # /dev/stdout started without stdout: not /dev/null, the stand-in
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self.path = path
        self.temp: str | None = None
        self.in_place = False  # a regular file written in place: emptied by the first write
        try:  # a symbolic link is written through, not replaced (/dev/stdout is one)
            link = os.path.islink(path)
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except FileNotFoundError:
            link, regular = False, True
        if atomic and regular and not link:
            head, tail = os.path.split(path)
            self.temp = os.path.join(head, f".{tail}.{os.getpid()}.tmp")
            self.fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        else:
            self.in_place = regular
            flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (0 if regular else os.O_TRUNC)
            self.fd = os.open(path, flags, 0o666)

    @property
    def written(self) -> bool:
        """Whether anything has been written (a FIFO or device: taken as so, it cannot be
        taken back)."""
        try:
            return os.lseek(self.fd, 0, os.SEEK_CUR) > 0
        except OSError:
            return True

    def commit(self) -> None:
        """Everything is written: put it in place (raises OSError when that fails)."""
        try:
            if self.temp is not None:
                os.fsync(self.fd)
            elif self.in_place and not self.written:  # nothing came: the output is empty
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = -1
            if self.temp is not None:
                os.replace(self.temp, self.path)
                self.temp = None
        finally:
            self.abort()

    def abort(self) -> None:
        """The run failed: drop the temporary file, leave FILE as it was (written in place,
        it is as it was if nothing was written)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temp)
            self.temp = None
