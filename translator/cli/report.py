"""`translator report RESULTS [--since DAY] [--until DAY] [--model M] [--format text|json|csv]
[--html FILE]`: the command over table/summary.py and table/report.py, with its refusals (one line and a sysexits status) and its writes (the page is written beside its
destination and renamed over it, only once the report was printed)."""

from __future__ import annotations

import contextlib
import errno
import os
from argparse import ArgumentTypeError
from datetime import date

from translator.cli.arguments import Parser
from translator.diagnostics import stderr as _stderr
from translator.diagnostics import stdout_text
from translator.exits import EX_CANTCREAT, EX_IOERR, EX_NOINPUT
from translator.extras import MissingExtra
from translator.object_store import StoreError
from translator.table.report import as_csv, as_json, page, text
from translator.table.summary import Filters, summarize

FORMATS = {"text": text, "json": as_json, "csv": as_csv}


def _day(value: str) -> str:
    """A --since/--until day: YYYY-MM-DD (a usage error otherwise)."""
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ArgumentTypeError(f"not a day (YYYY-MM-DD): {value!r}") from None


def _why(exc: OSError | ValueError, path: str) -> str:
    """Why the dataset cannot be read, in one line: pyarrow's FileNotFoundError holds only the
    path; a path that is there but no directory is said to be a file (a newcomer's first guess
    is the table's one file, or a log)."""
    if isinstance(exc, FileNotFoundError):
        if os.path.exists(path.removeprefix("file://")):
            return "a file, not a results table (the directory --results-table writes)"
        return os.strerror(errno.ENOENT)
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def build_parser() -> Parser:
    parser = Parser(prog="translator report", description="Summarize a --results-table table.")
    parser.add_argument("results", metavar="RESULTS", help="the table's directory or URL")
    parser.add_argument("--since", metavar="DAY", type=_day, help="only the runs of DAY (YYYY-MM-DD, UTC) and after")
    parser.add_argument("--until", metavar="DAY", type=_day, help="only the runs of DAY (YYYY-MM-DD, UTC) and before")
    parser.add_argument("--model", metavar="MODEL", help="only the runs whose (first) model is MODEL")
    parser.add_argument("--format", choices=sorted(FORMATS), default="text",
                        help="text (default); json: one object; csv: the table per day and model")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with plots")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = summarize(args.results, Filters(args.since, args.until, args.model))
    except MissingExtra as exc:
        _stderr([f"translator: report: {exc}"])
        return exc.status
    except StoreError as exc:
        _stderr([f"translator: {exc.strerror}"])
        return EX_IOERR
    except (OSError, ValueError) as exc:  # a missing path, or files that are no table
        _stderr([f"translator: {args.results}: {_why(exc, args.results)}"])
        return EX_NOINPUT
    if summary is None:
        _stderr([f"translator: {args.results}: no runs" + (" (filtered)" if args.since or args.until or args.model else "")])
        return EX_NOINPUT
    temp = None
    if args.html:  # its destination and its plots first: a failure is said before the report, not after it
        try:
            content = page(args.results, summary)
            temp = _temp_beside(args.html)
        except MissingExtra as exc:
            _stderr([f"translator: report --html: {exc}"])
            return exc.status
        except OSError as exc:
            _stderr([f"translator: {args.html}: {exc.strerror}"])
            return EX_CANTCREAT
    status = stdout_text(FORMATS[args.format](summary), "translator report")
    if temp is not None:
        try:
            if not status:  # (a report that could not be printed gets no page either)
                with open(temp, "w", encoding="utf-8") as f:
                    f.write(content)
                os.replace(temp, args.html)
        except OSError as exc:
            _stderr([f"translator: {args.html}: {exc.strerror}"])
            status = EX_IOERR
        finally:
            with contextlib.suppress(OSError):  # (renamed: not there any more)
                os.unlink(temp)
    return status


def _temp_beside(path: str) -> str:
    """A new, empty temporary file beside `path` (OSError when its directory cannot take one),
    renamed over it once the page is written."""
    head, tail = os.path.split(path)
    temp = os.path.join(head, f".{tail}.{os.getpid()}.tmp")
    os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666))
    return temp

