"""The command: its main (the parser is parser.py's), the run it starts, and its sysexits-style
exit statuses."""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

from translator import stdio
from translator.cli.checks import UserError, check
from translator.cli.parser import build_parser
from translator.core.rates import ENV_CARD, RateCard
from translator.core.translator import Options
from translator.diagnostics import stderr as _stderr
from translator.diagnostics import stdout_text, use_json, use_quiet
from translator.encoders.formats import make_encoder
from translator.exits import (
    EX_CANTCREAT,
    EX_CONFIG,
    EX_DATAERR,
    EX_IOERR,
    EX_NOINPUT,
    EX_OK,
    EX_OSERR,
    EX_SOFTWARE,
    EX_UNAVAILABLE,
)
from translator.extras import install
from translator.shell import modes
from translator.shell.sink import SCARCE, Config, Outcome
from translator.version import __version__

if TYPE_CHECKING:
    from translator.encoders.array import JsonArray
    from translator.encoders.observed import Watch
    from translator.shell.output import OutputFile
    from translator.telemetry.deferred import Deferred

# The agent's own exit status per result subtype (caliban-event-formats.md, exit codes).
AGENT_STATUS = {
    "success": 0,
    "error": 1,
    "max_tokens": 1,
    "max_turns": 75,
    "cancelled": 124,
    "budget_exceeded": 137,
}

def exit_status(outcome: Outcome, use_agent_status: bool, claude_code: bool = False) -> int:
    if outcome.signal is not None:
        return 128 + outcome.signal
    if outcome.out_of_resources:
        return EX_OSERR
    if outcome.io_error:
        return EX_IOERR
    if outcome.internal_error:
        return EX_SOFTWARE
    if outcome.rejected or outcome.bad_data:
        return EX_DATAERR
    if outcome.broken_pipe:
        return EX_OK
    if outcome.missing_input:
        return EX_NOINPUT
    if use_agent_status:
        if outcome.last_subtype is None:  # else a CI job sees 66 and no reason
            _stderr(["translator: --exit-status: the input held no run"])
            return EX_NOINPUT
        if claude_code:  # `claude -p` exits 1 for every error result (the captures' statuses)
            return EX_OK if outcome.last_subtype == "success" else 1
        return AGENT_STATUS.get(outcome.last_subtype, 1)
    return EX_OK


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:  # `translator report RESULTS`; a file named report: ./report
        from translator.cli import report

        return report.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.print_completion:
        from translator.cli.completion import script

        return stdout_text(script(parser, args.print_completion))
    try:
        check(args)
        rates = load_rates(args.rates)
    except UserError as exc:
        _stderr([f"translator: {exc}"])
        return exc.status
    partial, results_only = args.include_partial_messages, args.results_only
    if args.log_format == "json":
        use_json()
    if args.quiet:
        use_quiet()
    if not args.files and stdin_is_a_terminal(args):
        _stderr(["translator: reading the agent's events from the terminal; end with Ctrl-D, or pipe a log "
                 "in (translator < events.ndjson) or name files"], "info")

    cfg = Config(
        sources=args.files or ["-"],
        make_encoder=functools.partial(
            make_encoder, args.format, include_partial_messages=partial, results_only=results_only, rates=rates,
            fixed_session_id=args.session_id is not None,
        ),
        rates=rates,
        options=Options(
            strict=args.strict,
            stop_on_invalid=args.on_invalid == "fail",
            max_line_bytes=args.max_line_bytes,
            max_inflate_ratio=args.max_inflate_ratio,
        ),
        clock=args.clock,
        session_id=args.session_id,
        reject_file=args.reject_file,
        follow=args.follow,
        from_end=args.from_end,
        listen=args.listen,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        grace=args.grace,
        line_timeout=args.line_timeout,
        max_pending_bytes=args.max_pending_bytes or 2 * args.max_line_bytes,
        socket_mode=args.socket_mode,
        metrics=args.metrics,
        array=json_array(args.format) if args.output_format == "json" else None,
    )
    batch = args.out_dir is not None or args.results_table is not None  # its workers export
    telemetry = None if batch else telemetry_on(lasting=bool(args.follow or args.listen))
    cfg.watch = watches(args, telemetry)
    try:
        return translate(args, cfg)
    finally:
        if telemetry is not None:
            telemetry.close()  # the last exports, within a few seconds whatever the collector does


def json_array(fmt: str) -> JsonArray:
    """--output-format json's array (imported only then)."""
    from translator.encoders.array import JsonArray

    return JsonArray(claude_code=fmt == "claude-code")


def telemetry_on(lasting: bool) -> Deferred | None:
    """Claude Code's OpenTelemetry export when CLAUDE_CODE_ENABLE_TELEMETRY=1 (the SDK imported
    only then); without the otel extra that is said and the translation goes on. `lasting`: a
    --follow or --listen, which a Prometheus scrape can find alive."""
    from translator import telemetry

    return telemetry.start_or_say(os.environ, lambda message: _stderr([f"translator: {message}"], "warning"),
                                  lasting)


def telemetry_variables() -> tuple[tuple[str, str], ...]:
    """For a batch: the workers make their exporters from these (the otel extra is checked here,
    once, and said as telemetry_on says it)."""
    from translator import telemetry
    from translator.extras import MissingExtra, need

    found = telemetry.variables(os.environ)
    if found:
        try:
            need("opentelemetry.sdk", "otel")
        except MissingExtra as exc:
            _stderr([f"translator: telemetry: {exc}; not exported"], "warning")
            return ()
    return found


def stdin_is_a_terminal(args: argparse.Namespace) -> bool:
    """The input is stdin and stdin a terminal (a newcomer's bare `translator`: it waits)."""
    if args.follow is not None or args.listen is not None or args.out_dir is not None or args.results_table is not None:
        return False
    try:
        return os.isatty(0)
    except OSError:
        return False


def translate(args: argparse.Namespace, cfg: Config) -> int:
    """The mode asked for, run; its exit status."""
    partial, results_only, rates = args.include_partial_messages, args.results_only, cfg.rates
    if args.out_dir is not None or args.results_table is not None:
        from translator.shell import replay  # the pool and progress bar cost the others nothing

        template = replay.Job(
            format=args.format, partial=partial, results_only=results_only, rates=rates,
            rates_digest=rates.fingerprint(), options=cfg.options, clock=args.clock, force=args.force,
            transcripts=args.transcripts, telemetry=telemetry_variables(),
        )
        return modes.out_dir(args.files, args.out_dir, args.jobs, template, args.results_table, args.cluster,
                             args.store_timeout, args.task_timeout)
    output: OutputFile | None = None
    if args.output not in (None, "-"):
        from translator.shell.output import OutputFile  # only -o FILE needs it

        try:
            output = OutputFile(args.output, atomic=args.follow is None)
        except OSError as exc:
            _stderr([f"translator: --output {args.output}: {exc.strerror}"])
            return os_status(exc, EX_CANTCREAT)
        cfg.output_in_place = output.in_place
    try:
        outcome = modes.run(cfg, 1 if output is None else output.fd)
    except OSError as exc:  # what the shell opens to start: the reject file, a pipe, an event loop
        if args.reject_file is not None and exc.filename == args.reject_file:
            _stderr([f"translator: --reject-file {args.reject_file}: {exc.strerror}"])
            status = os_status(exc, EX_CANTCREAT)
        else:  # a pipe for the signals or the event loop's own fds: the system's resources
            _stderr([f"translator: cannot start: {exc.strerror}"])
            status = EX_OSERR
        if output is not None:
            output.abort()
        return status
    status = exit_status(outcome, args.exit_status, args.format == "claude-code")
    if output is not None:
        if outcome.io_error or outcome.out_of_resources or (status != EX_OK and not output.written):
            output.abort()  # FILE stays as it was: the run failed, or failed before its first frame
        else:
            try:
                output.commit()
            except OSError as exc:
                _stderr([f"translator: --output {args.output}: {exc.strerror}"])
                return EX_IOERR
    return status


def watches(args: argparse.Namespace, telemetry: Deferred | None = None) -> Watch | None:
    """What watches the streams beside their frames: --transcripts' session files, the
    telemetry; one Watch however many (observed.watch_of)."""
    from translator.encoders.observed import watch_of

    found: list[Watch] = [] if telemetry is None else [telemetry]
    if args.transcripts is not None:
        from translator.transcripts.files import Transcripts

        found.append(Transcripts(args.transcripts, __version__, deferred=True))
    return watch_of(found)


def os_status(exc: OSError, status: int) -> int:
    """`status` for a file that could not be opened, or EX_OSERR when the system ran out of
    what it takes (file descriptors, memory) and the file is not at fault."""
    return EX_OSERR if exc.errno in SCARCE else status


def load_rates(path: str | None) -> RateCard:
    """--rates, else the agent's card named by CALIBAN_RATES_YAML, else the bundled one;
    `--rates genai-prices`: that package's prices (an extra), named in a note."""
    if path == "genai-prices":
        try:
            from translator.cli.prices import GenaiPricesCard
            card = GenaiPricesCard()
        except ImportError:
            raise UserError("--rates genai-prices", f"needs the prices extra: {install('prices')}",
                            EX_UNAVAILABLE) from None
        _stderr([f"translator: rates: {card.identity} (long-context tiers at their base price)"], "info")
        return card
    name = f"--rates {path}" if path else f"{ENV_CARD}={os.environ.get(ENV_CARD)}"
    try:
        return RateCard.load(path) if path else RateCard.default(os.environ)
    except OSError as exc:
        raise UserError(name, exc.strerror or str(exc), EX_CONFIG) from None
    except ValueError as exc:
        raise UserError(name, str(exc), EX_CONFIG) from None


def run() -> NoReturn:
    """Console-script entry point. Whatever escapes is still one line, not a traceback
    (TRANSLATOR_TRACEBACK=1 shows it)."""
    stdio.hold()
    try:
        status = main()
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
    except MemoryError as exc:
        status = out_of_memory(exc)
    except Exception as exc:
        if os.environ.get("TRANSLATOR_TRACEBACK"):
            raise
        _stderr([f"translator: internal error: {type(exc).__name__}: {exc} (TRANSLATOR_TRACEBACK=1 shows where)"])
        status = EX_SOFTWARE
    except BaseException as exc:  # (a Rust panic is no Exception: pyo3's PanicException)
        if not _scarce(exc):
            raise
        status = out_of_memory(exc)
    leave(status)


def _scarce(exc: BaseException) -> bool:
    """Whether a library's failure is the system's refusal of memory or threads: a Rust panic
    (delta-rs: pyo3's PanicException) that could not spawn a thread or allocate."""
    text = str(exc)
    return type(exc).__name__ == "PanicException" and any(
        w in text for w in ("can't spawn", "Resource temporarily unavailable", "allocat", "os error 12"))


def out_of_memory(exc: BaseException) -> int:
    """The one line of a process the system refused memory (ulimit -v, a container's limit): 71."""
    why = str(exc).splitlines()[0] if str(exc) else "no memory"
    _stderr([f"translator: out of memory: {why}; give it more memory (ulimit -v, the container's limit)"])
    return EX_OSERR


def leave(status: int) -> NoReturn:
    """Exit with `status`. When nothing is left to run at exit (no atexit hook, no other
    thread), the interpreter's teardown would only free memory, which costs ~6 ms for the
    modules loaded (more than a small input's translation): the standard streams are flushed
    and the process ends without it. Otherwise (and if a flush fails) the usual exit.

    Only CPython's private `atexit._ncallbacks` tells whether a hook is registered; a Python
    without it gets the usual exit. The public ways measured fall short: a hook of ours that
    ends the process would run before one registered earlier (hooks run last-in first-out: a
    coverage tool's, started from a .pth, would be lost), and `gc.freeze()` before the usual
    exit costs ~2 ms a start more."""
    import atexit
    import threading

    hooks = getattr(atexit, "_ncallbacks", None)
    if hooks is not None and hooks() == 0 and threading.active_count() == 1:
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except (OSError, ValueError):
            pass  # the usual exit says it, as it always has
        else:
            os._exit(status)
    raise SystemExit(status)
