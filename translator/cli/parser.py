"""The command line's parser: every option with its help, the examples the help ends with,
and the version; `translator --help` and the shell completions are read off it."""

from __future__ import annotations

import argparse

from translator.cli.arguments import Parser, Version
from translator.cli.completion import SHELLS
from translator.core.compressed import MAX_RATIO
from translator.encoders.formats import FORMATS
from translator.version import __version__

EXAMPLES = """\
examples:
  live, in a pipe (frames appear as the agent's events do):
    caliban-worker ... | translator | jq -r 'select(.type == "result") | .result'
  replay saved logs (each file is its own stream; durations estimated from ttft/tbt):
    translator logs/run-1.ndjson logs/run-2.ndjson > translated.jsonl
  sidecar next to a worker that appends to a shared log:
    translator --follow /shared/stdout.ndjson
  a service on a unix socket (clients send a stream, half-close, read the translation):
    translator --listen unix:/run/translator.sock
  batch replay of a directory of logs into another, on every core:
    translator --out-dir translated/ logs/
  the whole conversation as one JSON array, as claude -p --output-format json --verbose:
    translator --format claude-code --output-format json run.ndjson | jq -r '.[-1].result'
  CI, branching on the run's outcome like the agent itself:
    caliban-worker ... | translator --results-only --exit-status > result.json
  a drop-in for scripts written against Claude Code:
    caliban-worker ... | translator --format claude-code | my-claude-code-consumer
  keep bad input for later, stop at the first bad line:
    translator --reject-file rejects.ndjson --on-invalid fail < events.ndjson
  every run's result as a row of a Delta Lake table, then a summary of cost and failures:
    translator --results-table results/ logs/ && translator report results/

exit status: 0 ok; 64 usage; 65 bad input under --on-invalid fail, or broken compressed
input (--out-dir: a file's content failed); 66 an input file could not be opened (or, with
--exit-status, no run in the input); 69 an optional extra is missing; 70 internal error; 71
out of file descriptors or memory; 73 --output, --reject-file or --out-dir cannot be created; 74 I/O error; 78 bad --rates file; 129/130/143 SIGHUP/SIGINT/SIGTERM (open runs are closed as
cancelled first). With --exit-status, the agent's code for the last run: 0 success, 1 error
or max_tokens, 75 max_turns, 124 cancelled, 137 budget_exceeded; with --format claude-code,
Claude Code's: 0 success, 1 any error.
"""


def octal(text: str) -> int:
    """A file mode as chmod takes it (argparse names this function in its error)."""
    return int(text, 8)


def unsized(prog: str) -> argparse.HelpFormatter:
    """The formatter argparse makes for every option added, to check its metavar: given a
    width, it does not import shutil to ask the terminal's (~2 ms a start, for nothing)."""
    return argparse.HelpFormatter(prog, width=80)


def build_parser() -> Parser:
    p = Parser(
        prog="translator",
        description="Translate a coding agent's raw event stream (JSONL), or its headless stream-json, into "
        "stream-json whose result frame carries the Claude Code keys (ADR 0049), or into what the Claude "
        "Code CLI prints (--format claude-code).",
        epilog=EXAMPLES,
        formatter_class=unsized,
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="inputs in order; '-' or none: stdin")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="enriched",
        help="enriched: the agent's stream-json with the ADR 0049 result (default); "
        "claude-code: what the Claude Code CLI prints (claude -p --output-format stream-json "
        "--verbose; with --results-only, --output-format json)",
    )
    p.add_argument(
        "--output-format",
        choices=("stream-json", "json"),
        default="stream-json",
        help="stream-json: a frame per line (default); json: all of them as one JSON array, as claude -p "
        "--output-format json --verbose prints (for jq: '.[-1].result'); not with --follow, --listen, "
        "--metrics or a batch",
    )
    p.add_argument(
        "--include-partial-messages",
        action="store_true",
        help="also emit text/thinking delta frames (and no end-of-turn message frames)",
    )
    p.add_argument(
        "--results-only", action="store_true", help="print only the result frame of each run"
    )
    p.add_argument(
        "--session-id", metavar="ID",
        help="session id to stamp (default: the agent's own on headless input, else for a file or URL one "
             "derived from its full path, the same on every replay, else a new UUID4 per input)",
    )
    p.add_argument(
        "--clock",
        choices=("auto", "wall", "recorded", "estimated"),
        default="auto",
        help="how durations are measured: arrival time (wall), the events' ts/timestamp "
        "(recorded), or ttft+tbt per turn (estimated); auto: recorded if stamped, else wall "
        "for pipes/sockets/terminals and estimated for files (default)",
    )
    p.add_argument("--rates", metavar="FILE", help="rate card (the agent's rates.yaml, JSON or TOML) replacing the bundled one "
                   "(default: $CALIBAN_RATES_YAML if set); genai-prices: that package's prices")
    p.add_argument(
        "--on-invalid",
        choices=("report", "fail"),
        default="report",
        help="report: a bad line is reported on stderr and skipped (default); fail: close the "
        "open run and exit 65",
    )
    p.add_argument("--reject-file", metavar="PATH", help="append every rejected line here, verbatim")
    p.add_argument(
        "--max-line-bytes",
        type=int,
        default=64 << 20,
        metavar="N",
        help="longer lines are reported and skipped (default: 64 MiB)",
    )
    p.add_argument(
        "--max-inflate-ratio",
        type=int,
        default=MAX_RATIO,
        metavar="N",
        help=f"gzip or zstd input that expands more than N times its size, past its first "
        f"--max-line-bytes, is cut off as a compression bomb (exit 65; default: {MAX_RATIO}; 0: no limit)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="also reject an event with a field the agent's serde types do not have (by default "
        "it is ignored, as serde ignores it); the output of what is accepted is the same",
    )
    # Accepted and ignored: every line is checked at no extra cost now (scripts keep working).
    p.add_argument("--trust-input", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the frames to FILE instead of stdout; a regular file is replaced atomically "
        "when everything is written (with --follow: written as it comes)",
    )
    p.add_argument(
        "--exit-status",
        action="store_true",
        help="exit with the agent's own status for the last run's subtype (--format claude-code: "
        "Claude Code's, 0 success, 1 any error)",
    )
    side = p.add_argument_group("sidecar")
    side.add_argument(
        "--follow",
        metavar="FILE",
        help="keep translating FILE as it grows, like tail -F (a truncated or replaced file is "
        "a new stream); SIGTERM closes the open run as cancelled",
    )
    side.add_argument("--from-end", action="store_true", help="with --follow: skip what FILE holds already")
    serve = p.add_argument_group("service")
    serve.add_argument(
        "--listen",
        metavar="ADDRESS",
        help="serve: each connection to unix:PATH or tcp:[HOST:]PORT (loopback unless HOST is "
        "given) sends an event stream and gets its translation back",
    )
    # Mode options default to None ("not given"); checks.check fills in the defaults.
    serve.add_argument("--max-connections", type=int, metavar="N", help="with --listen: served at once (default 64)")
    serve.add_argument("--idle-timeout", type=float, metavar="S", help="with --listen: close a connection quiet this long (default 300)")
    serve.add_argument("--grace", type=float, metavar="S", help="with --listen: after SIGTERM, how long open connections may finish (default 10)")
    serve.add_argument("--line-timeout", type=float, metavar="S", help="with --listen: close a connection whose line is unfinished this long after it began (default: 60, or --idle-timeout if shorter)")
    serve.add_argument(
        "--max-pending-bytes", type=int, metavar="N",
        help="with --listen: bytes of unfinished lines held for all connections together; a line that would "
        "pass it is skipped and reported (default: 2 x --max-line-bytes)",
    )
    serve.add_argument("--socket-mode", type=octal, metavar="MODE", help="with --listen unix:PATH: the socket's permissions, octal (default 0600)")
    watch = p.add_argument_group("observability")
    watch.add_argument(
        "--metrics",
        metavar="ADDRESS",
        help="serve Prometheus metrics at http://ADDRESS/metrics and a health probe at /healthz; "
        "ADDRESS is tcp:[HOST:]PORT (loopback unless HOST is given; default: off)",
    )
    watch.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="say only errors on stderr: no reports of bad lines, recoveries, notes or summaries "
        "(the exit status still tells; --exit-status, --on-invalid fail)",
    )
    watch.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="diagnostics on stderr as text lines (default) or one JSON object per line "
        "(time, level, source, line, reason, kind, excerpt) for log shippers",
    )
    watch.add_argument(
        "--transcripts",
        metavar="DIR",
        help="also write each input stream's runs as a Claude Code session file, "
        "DIR/projects/<slug>/<session>.jsonl (DIR is a Claude config dir: ccusage and the Agent SDKs' "
        "session readers read it); in every mode; translating a log again rewrites its own file",
    )
    replay = p.add_argument_group("batch replay")
    replay.add_argument(
        "--out-dir",
        metavar="DIR",
        help="batch replay: translate each FILE (or every *.ndjson/*.jsonl[.gz] under a "
        "directory FILE, or matching a quoted glob) into DIR/<relative path>.<format>.jsonl, in "
        "parallel; relative to the arguments' common parent",
    )
    replay.add_argument("--jobs", type=int, metavar="N", help="with --out-dir: worker processes (default: one per core)")
    replay.add_argument("--force", action="store_true", help="with --out-dir: redo outputs that are up to date")
    fleet = p.add_argument_group("fleet (the fleet extra: pip install '.[fleet,s3]' in the clone; --results-table alone: '.[table]'; paths may be s3://, gs://, az:// URLs)")
    fleet.add_argument(
        "--results-table",
        metavar="PATH",
        help="batch replay: also write every run's result as a row of a Delta Lake table at PATH "
        "(partitioned by date: one commit a day of the batch, written by a process of its own; works without --out-dir)",
    )
    fleet.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="batch replay on Dask: tcp://HOST:PORT of a running scheduler, or local[:N] for a "
        "LocalCluster of N worker processes (default: the local process pool)",
    )
    fleet.add_argument(
        "--store-timeout", type=float, metavar="S",
        help="s3:// URLs: how long a connect, and each wait for an answer or the next bytes of a read "
        "or write, may take before the request is tried again (3 tries, then the file fails, 74) "
        "(default: $TRANSLATOR_STORE_TIMEOUT, else 30)",
    )
    fleet.add_argument(
        "--task-timeout", type=float, metavar="S",
        help="a worker that holds a task this long without finishing any (the local pool: without "
        "getting on with it) is given up on, its tasks run on the other workers (twice at most, then "
        "their files fail, 74) (default: 300, Dask's worker-ttl)",
    )
    p.add_argument("--version", action=Version, version=f"translator {__version__}")
    p.add_argument(
        "--print-completion",
        choices=SHELLS,
        metavar="SHELL",
        help="print a completion script for SHELL (bash, zsh or tcsh) and exit, e.g. "
        "translator --print-completion bash > ~/.local/share/bash-completion/completions/translator",
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # help and usage: the terminal's width
    return p
