"""What became of a batch's files, kept as they come (on every engine): a count of each kind and
the failures whole; the results rows of the others staged for the table (table/parquet.Staged)
when there is one, not held. A list of every file's `Done` and its rows, kept to the end, was
the batch's memory: ~1 GB in the parent at 100,000 sessions, ~2 GB with the table. The names
kept for the table (the logs it replaces, the files whose rows are in their records) are on disk.
"""

from __future__ import annotations

from typing import Any

from translator.shell.progress import Progress
from translator.shell.replay import Done, shown
from translator.shell.scratch import Names
from translator.table.parquet import Staged

STAGE_ROWS = 4096  # results rows staged for the table at a time (as dicts: ~1.5 KB each)


class Outcomes:
    """The files done so far, and (with `table`) their rows on their way to the table."""

    def __init__(self, table: bool = False) -> None:
        self.table = table
        self.files = self.skipped = self.bytes = 0
        self.failed: list[Done] = []
        self.replaced = Names()  # the logs whose rows the table replaces, none of their rows staged
        self.up_to_date = Names()  # the files whose rows are in their records (shown relative paths)
        self._rows: list[dict[str, Any]] = []
        self._staged: Staged | None = None

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
        if self._staged is None:
            self._staged = Staged()
        self._staged.add(self._rows)
        self._rows = []

    @property
    def changes(self) -> bool:
        """Whether the table has anything to be told: rows staged, or logs whose rows it replaces."""
        return bool(self.replaced or self._rows or (self._staged is not None and self._staged.groups))

    def staged(self) -> Staged:
        """Every row staged so far (a new, empty stage if none)."""
        self._flush()
        assert self._staged is not None
        return self._staged

    def close(self) -> None:
        self.replaced.close()
        self.up_to_date.close()
        if self._staged is not None:
            self._staged.close()
            self._staged = None


def report_done(result: Done, done: Outcomes, bar: Progress) -> None:
    """A file is done (on a local pool or a cluster): its reports, in the log format asked
    for, above the bar (progress.py: -q, a stderr gone away); then it counts."""
    if result.diagnostics:
        bar.say(result.diagnostics)
    bar.file_done()
    done.add(result)
