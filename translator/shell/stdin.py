"""Files and stdin under anyio, for `--metrics` (whose health probe watches the event loop):
each named input (or `-`) read to its end, one after another, each its own stream, opened as
the shell without an event loop opens them (direct.py). Regular files are read directly;
pipes, sockets and terminals are awaited so that a signal can interrupt a quiet input."""

from __future__ import annotations

import os

import anyio
import anyio.lowlevel

from translator.shell.direct import open_input, read_chunk
from translator.shell.pump import Pump, Shell
from translator.shell.sink import OutputStuck


async def sources(shell: Shell) -> None:
    """Every source in order, until a signal or `--on-invalid fail` stops them."""
    for name in shell.cfg.sources:
        await source(shell, name)
        if shell.outcome.signal is not None or shell.outcome.rejected:
            break


async def source(shell: Shell, name: str) -> None:
    opened = open_input(name, shell.outcome)
    if opened is None:
        return
    fd, label, pollable = opened
    core = shell.new_core(label, live=pollable)
    pump = Pump(shell, core)

    async def read() -> bytes | None:
        if pollable:
            await anyio.wait_readable(fd)
        else:
            await anyio.lowlevel.checkpoint()
        return read_chunk(fd, label, shell.outcome)

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
