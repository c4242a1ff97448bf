"""What the command was started with that it keeps: the standard streams' numbers, and the
stop signals it was started ignoring.

The standard streams' numbers are held from the start. A stream the command was started
without (`<&-`, `>&-`, `2>&-`) would otherwise give its number to the next file opened: an
`-o FILE` as fd 0 would be read as stdin, a reject file as fd 2 would get the diagnostics. Its
place is taken by /dev/null opened the wrong way round (stdin write-only, stdout and stderr
read-only), so the stream still behaves as closed: its reads or writes fail with EBADF, as they
did, and what the command says about a closed stream is unchanged."""

from __future__ import annotations

import os
import signal

# fd -> how its stand-in is opened: the direction the stream is never used in
STAND_INS = ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_RDONLY))
HELD: set[int] = set()  # the standard fds a stand-in was put on
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def hold() -> None:
    """Put a stand-in on each standard fd that is closed (close-on-exec: a child process is
    started without it, as this one was)."""
    for fd, flags in STAND_INS:
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, flags | os.O_CLOEXEC)  # the lowest free number: fd (those below are held)
            HELD.add(fd)


def names_held(path: str) -> bool:
    """Whether `path` (/dev/stdin, /dev/fd/0, /proc/self/fd/0) names a standard stream the
    command was started without: opening it would open the stand-in, /dev/null, where it
    was 'No such file or directory'. Only links are followed, and only when a stand-in is held."""
    if not HELD:
        return False
    own = (f"/proc/{os.getpid()}/fd", "/proc/self/fd")
    for _ in range(8):  # /dev/stdin -> /proc/self/fd/0; /dev/fd -> /proc/self/fd
        parent, base = os.path.split(os.path.abspath(path))
        parent = os.path.realpath(parent)
        if parent in own:
            return base.isdigit() and int(base) in HELD
        if not os.path.islink(full := os.path.join(parent, base)):
            return False
        path = os.path.join(parent, os.readlink(full))
    return False


def stop_signals() -> tuple[signal.Signals, ...]:
    """The stop signals a shell acts on: those the command did not start with ignored. One
    started by `nohup` (SIGHUP ignored) or as a shell's background job (SIGINT ignored) keeps
    ignoring them, as a Unix command does."""
    return tuple(signum for signum in STOP_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN)
