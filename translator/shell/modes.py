"""The mode the command line asks for, and the shell that runs it: files and stdin,
`--follow`, `--listen` (under one signal watcher, to one output), or `--out-dir` (local
processes, or URLs and a Dask cluster). The shells import only the pump and below; this is
the one place that knows them all, so the import graph stays a tree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from translator.diagnostics import stderr
from translator.shell.pump import Config, Outcome, Output, Shell

if TYPE_CHECKING:
    from translator.shell.replay import Job


async def translate(cfg: Config, out_fd: int = 1) -> Outcome:
    """Translate the configured input to `out_fd`; never raises for I/O trouble."""
    out = Output(out_fd)
    shell = Shell(cfg, out)
    try:
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
    finally:
        out.close()
        if shell.rejects is not None:
            shell.rejects.close()
        if shell.metrics is not None:
            shell.metrics.close()
    return shell.outcome


def out_dir(names: list[str], out_dir: str | None, workers: int, template: Job,
            results_table: str | None = None, cluster: str | None = None) -> int:
    """`--out-dir`/`--results-table`: translate everything under `names` as `template` says;
    the exit status."""
    if results_table is not None:
        from translator.extras import MissingExtra, need

        try:
            need("pyarrow")
        except MissingExtra as exc:
            stderr([f"translator: --results-table: {exc}"])
            return exc.status
    if cluster is not None or any("://" in n for n in [*names, out_dir or ""]):
        from translator.shell import fleet

        return fleet.run(names, out_dir, workers, template, results_table, cluster)
    from translator.shell import batch

    return batch.run(names, out_dir, workers, template, results_table)
