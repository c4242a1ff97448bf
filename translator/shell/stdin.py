"""Files and stdin: each named input (or `-`) read to its end, one after another, each its
own stream. Regular files are read directly; pipes, sockets and terminals are awaited with
anyio so that a signal can interrupt a quiet input."""

from __future__ import annotations

import errno
import os
import stat

import anyio
import anyio.lowlevel

from translator.diagnostics import stderr as _stderr
from translator.feed import CHUNK
from translator.shell.pump import OutputStuck, Pump, Shell


async def sources(shell: Shell) -> None:
    """Every source in order, until a signal or `--on-invalid fail` stops them."""
    for name in shell.cfg.sources:
        await source(shell, name)
        if shell.outcome.signal is not None or shell.outcome.rejected:
            break


async def source(shell: Shell, name: str) -> None:
    if name == "-":
        fd, label = 0, "<stdin>"
    else:
        label = name
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError as exc:
            _stderr([f"translator: {name}: {exc.strerror}"])
            shell.outcome.missing_input = True
            return
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # opens fine, fails on the first read
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    except OSError as exc:
        _stderr([f"translator: {label}: {exc.strerror}"])
        shell.outcome.missing_input = True
        if fd != 0:
            os.close(fd)
        return
    pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)
    core = shell.new_core(label, live=pollable)
    pump = Pump(shell, core)

    async def read() -> bytes | None:
        if pollable:
            await anyio.wait_readable(fd)
        else:
            await anyio.lowlevel.checkpoint()
        try:
            return os.read(fd, CHUNK)
        except OSError as exc:
            _stderr([f"translator: {label}: read error: {exc.strerror}"])
            shell.outcome.io_error = True
            return None

    try:
        with anyio.CancelScope() as scope:
            shell.read_scope = scope
            await pump.run(read)
        shell.read_scope = None
        await pump.close(cancelled=shell.outcome.signal is not None)
    except (OSError, OutputStuck):
        raise  # the output's trouble: the shell says it, for every input alike
    except Exception as exc:  # the last resort: this input ends, the next one is read
        shell.read_scope = None
        await shell.abandon(core, exc)
    finally:
        if fd != 0:
            os.close(fd)
        shell.tally(core)
