"""A batch's progress and its reports, on every engine (the local pool, a Dask cluster): the
bar on a terminal, a line every EVERY_S seconds off one (a CI job's or a pod's log shows a long
batch moving), neither with `--quiet`; the files' reports above the bar, through
diagnostics.stderr (so `--quiet` and `--log-format json` hold, and a stderr gone away costs no
file its translation), and a warning that is about no line (a model without a rate) said once
per command, not once per file."""

from __future__ import annotations

import os
import sys
import time
from contextlib import suppress
from types import TracebackType

from tqdm import tqdm

from translator.diagnostics import once, quiet, stderr

EVERY_S = 30.0  # off a terminal, a progress line at most this often
ENV_EVERY = "TRANSLATOR_PROGRESS_SECONDS"  # another period (a number of seconds; 0: none)


def drawn() -> bool:
    """Whether the bar is drawn: on a terminal; not without stderr (`2>&-`: Python has no
    sys.stderr) nor with --quiet."""
    return sys.stderr is not None and not quiet() and sys.stderr.isatty()


def period(env: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """How often a line is printed off a terminal (ENV_EVERY, else EVERY_S); 0: never."""
    try:
        return max(0.0, float(env.get(ENV_EVERY, EVERY_S)))
    except ValueError:
        return EVERY_S


class Progress:
    """How far a batch of `files` files (`total` bytes) is; a context manager, as tqdm is."""

    def __init__(self, total: int, files: int) -> None:
        self.files, self.done, self.total, self._n = files, 0, total, 0
        self.bar = tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, disable=not drawn(),
                        desc=f"0/{files} files")
        self.every = 0.0 if quiet() or sys.stderr is None or not self.bar.disable else period()
        self.started = self.last = time.monotonic()
        self.said: set[str] = set()

    @property
    def n(self) -> int:
        """The bytes read so far."""
        return int(self.bar.n) if not self.bar.disable else self._n

    def update(self, n: int) -> None:
        """`n` more bytes read; off a terminal, the line when it is due."""
        if not self.bar.disable:
            self.bar.update(n)
            return
        self._n += n
        now = time.monotonic()
        if self.every and now - self.last >= self.every:
            self.last = now
            share = f" ({100 * self._n / self.total:.0f}%)" if self.total else ""
            stderr([f"translator: {self.done}/{self.files} files, {self._n / 1e6:.1f} of {self.total / 1e6:.1f} MB"
                    f"{share} in {now - self.started:.0f} s"], "info")

    def file_done(self) -> None:
        self.done += 1
        self.bar.set_description(f"{self.done}/{self.files} files")

    def say(self, lines: list[str], level: str = "warning") -> None:
        """Reports, above the bar; a warning about no line only the first time."""
        fresh = once(lines, self.said)
        if not fresh:
            return
        if self.bar.disable:
            stderr(fresh, level)
            return
        with self.bar.external_write_mode(file=sys.stderr):
            stderr(fresh, level)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with suppress(OSError, ValueError):  # a terminal gone away: the batch's status is its own
            self.bar.close()
