"""What became of a batch's files, kept as they come (on every engine): a count of each kind and
the failures whole; the results rows of the others sent to the table's writer (a process of
its own: batch_table.py) when there is one, not held. A list of every file's `Done` and its rows, kept to the end, was
the batch's memory: ~1 GB in the parent at 100,000 sessions, ~2 GB with the table. The names
kept for the table (the logs it replaces, the files whose rows are in their records) are on disk.
"""

from __future__ import annotations

from typing import Any

from translator.shell.batch_table import TableWriter
from translator.shell.progress import Progress
from translator.shell.replay import Done, shown
from translator.shell.scratch import Names

STAGE_ROWS = 4096  # results rows sent to the table's writer at a time (as dicts: ~1.5 KB each)


class Outcomes:
    """The files done so far, and (with a table's `writer`) their rows on their way to the table."""

    def __init__(self, writer: TableWriter | None = None) -> None:
        self.writer = writer
        self.table = writer is not None
        self.files = self.skipped = self.bytes = 0
        self.failed: list[Done] = []
        self.replaced = Names()  # the logs whose rows the table replaces, none of their rows staged
        self.up_to_date = Names()  # the files whose rows are in their records (shown relative paths)
        self._rows: list[dict[str, Any]] = []
        self._sent = False

    def add(self, done: Done) -> None:
        """A file is done: counted, its rows staged (or dropped), the failure kept to be said."""
        self.files += 1
        self.bytes += done.size
        rows, done.results = done.results, []
        if done.error is not None:
            self.failed.append(done)
            return
        if done.skipped:
            self.skipped += 1
            if done.tabled:  # its rows are in the table: neither read nor written again
                return
            if self.table:
                self.up_to_date.add(shown(done.relative))
        if self.table:
            if done.source and not rows:  # (a log's staged rows carry its mark: parquet.Staged)
                self.replaced.add(done.source)
            self.stage(rows)

    @property
    def translated(self) -> int:
        return self.files - self.skipped - len(self.failed)

    def stage(self, rows: list[dict[str, Any]]) -> None:
        self._rows += rows
        if len(self._rows) >= STAGE_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.writer is not None and self._rows:
            self.writer.stage(self._rows)
            self._sent = True
        self._rows = []

    @property
    def changes(self) -> bool:
        """Whether the table has anything to be told: rows staged, or logs whose rows it replaces."""
        return bool(self.replaced or self._rows or self._sent)

    def write(self) -> str | None:
        """Every row staged written to the table, the logs of `replaced` emptied there; its
        identity (None: not written)."""
        assert self.writer is not None
        self._flush()
        self.writer.gone(self.replaced)
        return self.writer.write()

    def close(self) -> None:
        self.replaced.close()
        self.up_to_date.close()
        if self.writer is not None:
            self.writer.close()


def report_done(result: Done, done: Outcomes, bar: Progress) -> None:
    """A file is done (on a local pool or a cluster): its reports, in the log format asked
    for, above the bar (progress.py: -q, a stderr gone away); then it counts."""
    if result.diagnostics:
        bar.say(result.diagnostics)
    bar.file_done()
    done.add(result)
