"""The mode the command line asks for, and the shell that runs it: files and stdin (without
an event loop), `--follow`, `--listen` and `--metrics` (under anyio, one signal watcher, one
output), or `--out-dir` (local processes, or URLs and a Dask cluster). The shells import only
the sink, the pump and below; this is the one place that knows them all, so the import graph
stays a tree. Each shell is imported only when its mode is asked for: anyio and asyncio cost
more to import than a small input costs to translate."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from translator.diagnostics import stderr
from translator.shell.sink import Config, Outcome

if TYPE_CHECKING:
    from translator.shell.pump import Shell
    from translator.shell.replay import Job


def run(cfg: Config, out_fd: int = 1) -> Outcome:
    """Translate the configured input to `out_fd` with the shell its mode needs; never raises
    for I/O trouble (an OSError: the reject file cannot be opened)."""
    if cfg.follow is None and cfg.listen is None and cfg.metrics is None:
        from translator.shell import direct

        return direct.translate(cfg, out_fd)
    from translator.shell.pump import Shell

    # Before the event loop: a reject file that is a FIFO waits for its reader in open(2),
    # which a stop signal's default action ends (asyncio's first SIGINT only cancels a task).
    shell = Shell(cfg, out_fd)
    try:
        try:
            return loop(shell)
        finally:
            shell.close()
    finally:
        shell.out.close()


def loop(shell: Shell) -> Outcome:
    """The shell's mode run in an event loop."""
    import anyio

    try:
        return anyio.run(serve, shell)
    except OSError as exc:  # e.g. out of fds: raised again without the traceback, which holds
        # the half-made event loop that complains when freed (a traceback, "Exception ignored")
        hook, sys.unraisablehook = sys.unraisablehook, lambda _: None
        error = OSError(exc.errno, exc.strerror, exc.filename)
    sys.unraisablehook = hook
    raise error


async def translate(cfg: Config, out_fd: int = 1) -> Outcome:
    """Translate the configured input to `out_fd` in the running event loop; never raises for
    I/O trouble."""
    from translator.shell.pump import Shell

    shell = Shell(cfg, out_fd)
    try:
        return await serve(shell)
    finally:
        shell.out.close()
        shell.close()


async def serve(shell: Shell) -> Outcome:
    """The shell's mode (`--follow`, `--listen`, or files and stdin for `--metrics`), run."""
    cfg = shell.cfg
    if cfg.follow is not None:
        from translator.shell.follow import follow

        path, from_end = cfg.follow, cfg.from_end
        await shell.run(lambda: follow(shell, path, from_end))
    elif cfg.listen is not None:
        from translator.shell.service import listen

        address = cfg.listen
        await shell.run(lambda: listen(shell, address))
    else:
        from translator.shell.stdin import sources

        await shell.run(lambda: sources(shell))
    return shell.outcome


def out_dir(names: list[str], out_dir: str | None, workers: int, template: Job,
            results_table: str | None = None, cluster: str | None = None, store_timeout: float | None = None,
            task_timeout: float | None = None) -> int:
    """`--out-dir`/`--results-table`: translate everything under `names` as `template` says;
    the exit status."""
    if results_table is not None:
        from translator.extras import MissingExtra, available

        try:
            available("pyarrow")
        except MissingExtra as exc:
            stderr([f"translator: --results-table: {exc}"])
            return exc.status
    if cluster is not None or any("://" in n for n in [*names, out_dir or "", results_table or ""]):
        from translator.shell import fleet

        return fleet.run(names, out_dir, workers, template, results_table, cluster, store_timeout,
                         *([] if task_timeout is None else [task_timeout]))
    from translator.shell import batch

    return batch.run(names, out_dir, workers, template, results_table, *([] if task_timeout is None else [task_timeout]))
