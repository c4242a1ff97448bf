"""What the command line refuses before anything runs: options that make no sense together,
values out of range, inputs that cannot be one. Each is one line, `translator: <what>: <why>`,
with its sysexits status, never a traceback (the parser's own refusals are alike: arguments.py)."""

from __future__ import annotations

import argparse
import os
import re
import stat

from translator.encoders.observed import plain
from translator.exits import EX_CANTCREAT, EX_NOINPUT, EX_USAGE

# Options that only mean something in one mode (a mode is on when one of its options is
# given), with their defaults, filled in here so that the parser's None tells "not given".
BATCH = ("out_dir", "results_table")
MODE_OPTIONS: dict[tuple[str, ...], tuple[str, dict[str, object]]] = {
    BATCH: ("--out-dir or --results-table", {
        "jobs": os.cpu_count() or 1, "force": False, "cluster": None, "store_timeout": None, "task_timeout": None,
    }),
    ("follow",): ("--follow", {"from_end": False}),
    ("listen",): ("--listen", {
        "max_connections": 64, "idle_timeout": 300.0, "grace": 10.0, "line_timeout": None,
        "max_pending_bytes": None, "socket_mode": 0o600,
    }),
}
# Options the batch replay does not honour (each file gets its own derived session id, its
# statuses are per file, its outputs are files, it reports its own summary, not metrics).
NOT_IN_BATCH = ("session_id", "reject_file", "exit_status", "output", "metrics")
# Options of a single stream that a service or follower never exits with.
NOT_IN_SERVICE = ("exit_status",)


class UserError(Exception):
    """A mistake of the user's: one line on stderr and an exit status."""

    def __init__(self, what: str, why: str, status: int = EX_USAGE) -> None:
        super().__init__(f"{what}: {why}")
        self.status = status


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest, None)
    return value is not None and value is not False


def store_timeout(given: float | None) -> float:
    """--store-timeout, else $TRANSLATOR_STORE_TIMEOUT, else the default: positive seconds."""
    from translator.object_store import ENV, configured_timeout

    try:
        return configured_timeout(given)
    except ValueError as exc:
        raise UserError("--store-timeout" if given is not None else f"${ENV}", str(exc)) from None


def check(args: argparse.Namespace) -> None:
    """Raise UserError for what cannot run; fill in the mode options' defaults."""
    modes = []
    for mode, (name, defaults) in MODE_OPTIONS.items():
        active = [flag(dest) for dest in mode if given(args, dest)]
        modes += active[:1]
        for dest, default in defaults.items():
            if not active and given(args, dest):
                raise UserError(flag(dest), f"only with {name}")
            if getattr(args, dest, None) is None:
                setattr(args, dest, default)
    if len(modes) > 1:
        raise UserError(modes[0], f"does not go with {modes[1]}")
    if args.line_timeout is None:  # a line may take no longer than a quiet spell, nor a minute
        args.line_timeout = min(60.0, args.idle_timeout)
    batch = next((flag(dest) for dest in BATCH if given(args, dest)), None)
    if batch is not None:
        for dest in NOT_IN_BATCH:
            if given(args, dest):
                raise UserError(flag(dest), f"does not go with {batch}")
        if not args.files:
            raise UserError(batch, "needs input files or directories")
        args.store_timeout = store_timeout(args.store_timeout)
        if args.task_timeout is not None and not 0 < args.task_timeout < float("inf"):
            raise UserError("--task-timeout", "must be a positive number of seconds")
        if args.out_dir is None:  # the table's rows are the default format's: no frames to shape
            shaping = ["--format claude-code"] if args.format != "enriched" else []
            shaping += [flag(dest) for dest in ("include_partial_messages", "results_only") if given(args, dest)]
            if shaping:
                raise UserError(shaping[0], "only with --out-dir (--results-table alone writes no frames)")
    if args.follow is not None or args.listen is not None:
        name = "--follow" if args.follow is not None else "--listen"
        if args.files:
            raise UserError(name, "takes no input files")
        for dest in NOT_IN_SERVICE + (("output",) if name == "--listen" else ()):
            if given(args, dest):
                raise UserError(flag(dest), f"does not go with {name}")
    if args.output_format == "json":  # one array, closed at the end: a stream that ends, to one reader
        other = next((flag(dest) for dest in ("follow", "listen", "metrics", *BATCH) if given(args, dest)), None)
        if other is not None:
            raise UserError("--output-format json", f"does not go with {other}")
    if args.cluster is not None:
        check_cluster(args.cluster)
    if args.session_id is not None and not args.session_id.strip():
        raise UserError("--session-id", "must not be empty")
    if args.session_id is not None and not plain(args.session_id):
        raise UserError("--session-id", "must be a plain name (letters, digits, '.', '_', '-'), not a path")
    if args.include_partial_messages and args.results_only:
        raise UserError("--include-partial-messages", "does not go with --results-only (no deltas in a result)")
    for dest, low in (("max_line_bytes", 1), ("jobs", 1), ("max_connections", 1)):
        if getattr(args, dest) < low:
            raise UserError(flag(dest), f"must be at least {low}")
    if args.max_inflate_ratio < 0:
        raise UserError("--max-inflate-ratio", "must not be negative (0: no limit)")
    if args.max_pending_bytes is not None and args.max_pending_bytes < 1:
        raise UserError("--max-pending-bytes", "must be at least 1")
    for dest in ("idle_timeout", "line_timeout"):
        if getattr(args, dest) <= 0:
            raise UserError(flag(dest), "must be a positive number of seconds")
    if args.grace < 0:
        raise UserError("--grace", "must not be negative")
    for dest in ("listen", "metrics"):
        address = getattr(args, dest, None)
        if address is not None:
            check_address(flag(dest), address, unix=dest == "listen")
    if not any(given(args, dest) for dest in BATCH):
        check_outputs(args)
    if args.transcripts is not None:
        check_transcripts(args.transcripts)
    if args.follow is not None:
        try:
            kind = os.stat(args.follow).st_mode
        except OSError:  # not there yet: it is waited for
            kind = 0
        if stat.S_ISDIR(kind):
            raise UserError(f"--follow {args.follow}", "is a directory, not a file", EX_NOINPUT)
        if stat.S_ISFIFO(kind):
            from translator.shell.follow import FOLLOW_FIFO  # (what the follower says of one, too)

            raise UserError(f"--follow {args.follow}", FOLLOW_FIFO, EX_NOINPUT)


def check_cluster(address: str) -> None:
    """--cluster: local, local:N (N at least 1) or a scheduler's URL (Dask's schemes), else a
    usage error here (a malformed one was an internal error, 70, from Dask)."""
    if not re.fullmatch(r"local(:[1-9]\d*)?|(tcp|tls|ws|wss|ucx|inproc)://\S+", address):
        raise UserError(f"--cluster {address}", "expected tcp://HOST:PORT (a Dask scheduler) or local[:N]")


def check_transcripts(path: str) -> None:
    """--transcripts DIR: a local folder, where the readers of session files look (made if need be)."""
    if "://" in path:
        raise UserError(f"--transcripts {path}", "must be a local directory (a Claude config dir)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--transcripts {path}", "is not a directory", EX_CANTCREAT)


def check_outputs(args: argparse.Namespace) -> None:
    """An output (-o, --reject-file) that is an input, or the followed file, is refused before
    anything is opened for writing: it would be emptied as it is read (`--follow y -o y`),
    replaced by its own translation (`-o x x`), or fed its own rejects."""
    inputs = [args.follow] if args.follow is not None else args.files or ["-"]
    for dest in ("output", "reject_file"):
        path = getattr(args, dest, None)
        if path is None or (path == "-" and dest == "output"):
            continue
        try:
            out = os.stat(path)
        except OSError:  # not there (yet): only the followed file may come to be it
            if args.follow is not None and os.path.realpath(path) == os.path.realpath(args.follow):
                raise UserError(f"{flag(dest)} {path}", "is the file followed; it would read its own output") from None
            continue
        if not stat.S_ISREG(out.st_mode):  # a FIFO, a device, a terminal: nothing to destroy
            continue
        for name in inputs:
            try:
                st = os.fstat(0) if name == "-" else os.stat(name)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
                what = "the file followed" if args.follow is not None else f"the input {'<stdin>' if name == '-' else name}"
                harm = "overwrite" if dest == "output" else "append its rejects to"
                raise UserError(f"{flag(dest)} {path}", f"is {what}; it would {harm} what it reads")


def check_address(name: str, address: str, unix: bool) -> None:
    """`tcp:[HOST:]PORT` with a port 0-65535 (or `unix:PATH` where `unix`)."""
    if unix and re.fullmatch(r"unix:.+", address):
        return
    match = re.fullmatch(r"tcp:(?:.*:)?(\d+)", address)
    expected = "expected unix:PATH or tcp:[HOST:]PORT" if unix else "expected tcp:[HOST:]PORT"
    if match is None:
        raise UserError(f"{name} {address}", expected)
    if int(match[1]) > 65535:
        raise UserError(f"{name} {address}", "the port must be 0-65535")
