"""The command-line reference written from the parsers themselves, so that it cannot drift:
docs/cli.md (Markdown), docs/translator.1 (a man page, through argparse-manpage, which only
the test extra installs) and docs/caliban-claude.1 (the shim has no argparse parser: its page
is written from its usage and its flag lists). `python -m translator.cli.reference [DIR]`
(`make docs`) writes them; a test fails when the files in docs/ differ from what this writes,
or when the code reads an environment variable a page does not name."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from translator.cli import report
from translator.cli.parser import build_parser
from translator.shim import flags
from translator.shim.main import DOCS, USAGE
from translator.version import __version__

WIDTH = 100  # of the usage lines; a fixed width, so the page is the same on every terminal
INSTALLED_DOCS = "$PREFIX/share/doc/caliban-stream-translator"  # the installed docs' folder, under any prefix

# What each command reads from its environment (the pages' ENVIRONMENT sections).
TELEMETRY = (
    ("CLAUDE_CODE_ENABLE_TELEMETRY", "1: export Claude Code's OpenTelemetry (the otel extra), configured as "
     "Claude Code is by the standard variables (each also per signal where the standard has it): "
     "OTEL_METRICS_EXPORTER, OTEL_LOGS_EXPORTER, OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, "
     "OTEL_EXPORTER_OTLP_PROTOCOL (grpc, http/protobuf, http/json), OTEL_EXPORTER_OTLP_HEADERS, "
     "OTEL_EXPORTER_OTLP_COMPRESSION, OTEL_EXPORTER_OTLP_TIMEOUT (ms), OTEL_EXPORTER_OTLP_CERTIFICATE, "
     "OTEL_EXPORTER_OTLP_CLIENT_KEY, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, OTEL_METRIC_EXPORT_INTERVAL, "
     "OTEL_METRIC_EXPORT_TIMEOUT, OTEL_LOGS_EXPORT_INTERVAL, OTEL_TRACES_EXPORT_INTERVAL, "
     "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, OTEL_EXPORTER_PROMETHEUS_HOST, "
     "OTEL_EXPORTER_PROMETHEUS_PORT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_LOG_USER_PROMPTS, "
     "OTEL_LOG_TOOL_DETAILS (docs/observability.md)"),
    ("CLAUDE_CODE_ENHANCED_TELEMETRY_BETA", "1: with the telemetry on, traces too, as in Claude Code"),
)
TRANSLATOR_ENVIRONMENT = (
    ("CALIBAN_RATES_YAML", "the agent's rate card (rates.yaml), used when --rates is not given"),
    ("TRANSLATOR_STORE_TIMEOUT", "s3://, gs://, az:// URLs: --store-timeout's default, in seconds (30)"),
    ("TRANSLATOR_PROGRESS_SECONDS", "--out-dir and --results-table off a terminal: a progress line on stderr "
     "this often, in seconds (30; 0: none); none with -q"),
    ("TRANSLATOR_TRACEBACK", "set: an internal error (70) shows its Python traceback, not one line"),
    *TELEMETRY,
    ("AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*", "the object stores' credentials, as s3fs, gcsfs "
     "and adlfs read them"),
    ("TMPDIR", "where --results-table stages its rows before the table is written"),
)
SHIM_ENVIRONMENT = (
    ("CALIBAN_BIN", "the caliban to run (default: caliban on PATH)"),
    ("CALIBAN_SESSIONS_DIR", "caliban's sessions directory, passed on as --sessions-dir (default: "
     "$XDG_DATA_HOME/caliban/sessions; XDG_DATA_HOME: ~/.local/share)"),
    ("CALIBAN_CLAUDE_MODELS", "JSON model aliases added to sonnet, opus and haiku or replacing them, e.g. "
     "{\"sonnet\": \"openai/gpt-5\"}"),
    ("CALIBAN_CLAUDE_ARGS", "caliban flags of your own (shell words) added to every run, e.g. --provider openai"),
    ("CALIBAN_CLAUDE_KEEP_SYSTEM_PROMPT", "1: caliban's default system prompt where the app sends none"),
    ("CALIBAN_CLAUDE_BACKEND", "drive or print: one backend forced (default: caliban mcp serve for SDK apps "
     "with can_use_tool or hook callbacks, caliban -p otherwise)"),
    ("CALIBAN_CLAUDE_HOOK_TIMEOUT", "seconds a hook callback may take without a matcher timeout (60)"),
    ("CALIBAN_CLAUDE_MCP_TIMEOUT", "seconds a request to caliban mcp serve may take, written and answered (60)"),
    ("CALIBAN_MCP_TOOL_TIMEOUT, MCP_TOOL_TIMEOUT", "caliban's: whole seconds it waits for an MCP tool call (60); "
     "a relayed call of the app's tools keeps to it, a late allow running nothing"),
    ("CLAUDE_CONFIG_DIR", "where the session files are written: $CLAUDE_CONFIG_DIR/projects/<slug>/<session "
     "id>.jsonl (default: ~/.claude); none with --no-session-persistence (the TypeScript SDK's "
     "persistSession: false)"),
    ("ANTHROPIC_API_KEY", "passed on to caliban with the rest of the environment; whether it is set is the init "
     "frame's apiKeySource, as in Claude Code"),
    ("CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_SESSION_ACCESS_TOKEN, CLAUDE_CODE_HOST_SESSION_ID", "the only "
     "environment a TypeScript SDK claim() may bring (--await-claim); accepted, not read by caliban"),
    ("CALIBAN_RATES_YAML", "the rate card the results' cost is priced by (default: the bundled one)"),
    ("CLAUDE_CODE_SDK_READS_SESSION_STATE, CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS", "set by the TypeScript SDK "
     "(0.3) and Zed's claude-agent-acp: each run's session states are told (session_state_changed: running, "
     "then idle after its result), as Claude Code tells them"),
    ("CALIBAN_CLAUDE_RELAY_TOKEN", "not yours to set: the shim gives it, through caliban's settings, to the "
     "relays caliban starts for an app's SDK MCP servers, which prove with it that they are caliban's"),
    *TELEMETRY,
)
SHIM_EXAMPLES = """\
a prompt, the answer printed (Claude Code's print mode):
  caliban-claude -p "how many files are here?"
the result as JSON, for jq:
  git diff | caliban-claude -p "review this" --output-format json | jq -r .result
every frame as it comes:
  caliban-claude -p "fix the test" --output-format stream-json --verbose
no session file left behind:
  caliban-claude -p "hi" --no-session-persistence
the Python Agent SDK on caliban:
  ClaudeAgentOptions(cli_path="caliban-claude")
the TypeScript Agent SDK on caliban:
  query({prompt, options: {pathToClaudeCodeExecutable: "caliban-claude"}})
"""
SHIM_STATUS = ("0 the last result was a success; 1 it was an error (is_error), or Claude Code refused the "
               "command line (its own line on stderr, caliban not run); 64 no -p and not the SDK protocol "
               "(--input-format and --output-format stream-json); 74 the output could not be written; "
               "129/130/143 SIGHUP/SIGINT/SIGTERM (caliban stopped first).")


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # invocation, default, help


class Recorder(argparse.RawDescriptionHelpFormatter):
    """A help formatter that notes what `format_help()` hands it (usage, texts, each group and
    its options) instead of laying it out: argparse has no public list of a parser's options,
    but every parser gives its help to a formatter through these public methods."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH)
        self.usage = ""
        self.sections = [Section("")]

    def add_usage(self, usage: str | None, actions: Iterable[argparse.Action],
                  groups: Iterable[argparse._MutuallyExclusiveGroup], prefix: str | None = None) -> None:
        self.usage = self._format_usage(usage, actions, groups, prefix).strip()

    def start_section(self, heading: str | None) -> None:
        self.sections.append(Section(heading or ""))

    def end_section(self) -> None:
        self.sections.append(Section(""))  # what follows a group (the epilog) is outside it

    def add_text(self, text: str | None) -> None:
        if text and text != argparse.SUPPRESS:
            self.sections[-1].text.append(text.strip("\n"))

    def add_arguments(self, actions: Iterable[argparse.Action]) -> None:
        for action in actions:
            if action.help == argparse.SUPPRESS:
                continue
            default = action.default
            shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
            self.sections[-1].rows.append((self.invocation(action), shown, self._expand_help(action) if action.help else ""))

    def invocation(self, action: argparse.Action) -> str:
        """`-o, --output FILE`, as Python 3.13's argparse writes it, whichever Python writes the page."""
        if not action.option_strings:
            return self._format_args(action, action.dest)
        names = ", ".join(action.option_strings)
        return names if action.nargs == 0 else f"{names} {self._format_args(action, action.dest.upper())}"


def recorded(parser: argparse.ArgumentParser) -> Recorder:
    recorder = Recorder(parser.prog)
    parser.formatter_class = lambda prog: recorder
    parser.format_help()
    return recorder


def long_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option the help shows."""
    return [name for section in recorded(parser).sections for inv, _, _ in section.rows
            for name in inv.replace(",", " ").split() if name.startswith("--")]


def cell(text: str) -> str:
    """Help text as a table cell: one line, Markdown's own characters taken literally."""
    return re.sub(r"([\\`*_<>\[\]|])", r"\\\1", " ".join(text.split()))


def parser_markdown(parser: argparse.ArgumentParser) -> list[str]:
    rec = recorded(parser)
    out = [f"## `{parser.prog}`", "", "```text", rec.usage, "```", ""]
    for section in rec.sections:
        if not (section.text or section.rows):
            continue
        if section.title:
            out += [f"### {section.title[0].upper()}{section.title[1:]}", ""]
        for text in section.text:
            out += (["```text", text, "```"] if "\n" in text else [text]) + [""]
        if section.rows:
            what = "argument" if section.title == "positional arguments" else "option"
            out += [f"| {what} | default | meaning |", "|---|---|---|"]
            out += [f"| `{inv}` | {default} | {cell(help)} |" for inv, default, help in section.rows]
            out.append("")
    return out


def shim_markdown(usage: str, options: Mapping[str, Sequence[str]]) -> list[str]:
    out = ["## `caliban-claude`", "", "```text", usage.strip("\n"), "```", "",
           "It reads Claude Code's command line as the Agent SDKs write it, tolerantly: an option it does",
           "not know is warned about and skipped (with its value when it evidently has one). What each",
           "option does on caliban: [shim.md](shim.md#supported-and-not-supported). The options it reads:", ""]
    for kind, names in options.items():
        out += [f"- {kind}: " + ", ".join(f"`{n}`" for n in sorted(names, key=str.lower)), ""]
    return out


def markdown(parsers: Sequence[argparse.ArgumentParser], shim_usage: str, shim_flags: Mapping[str, Sequence[str]]) -> str:
    head = ["<!-- Written by `make docs` (python -m translator.cli.reference) from the parsers: do not edit. -->",
            "", "# Command-line reference", "",
            "Every option of the commands, written from their own parsers (`tests/cli/test_cli_reference.py`",
            "fails when this page is not what they say). What the options do, in depth: [usage.md](usage.md);",
            "the same as man pages: [translator.1](translator.1) and [caliban-claude.1](caliban-claude.1)",
            "(`man -l docs/translator.1`; installed, `man translator`).", ""]
    body = [line for p in parsers for line in parser_markdown(p)] + shim_markdown(shim_usage, shim_flags)
    return "\n".join(head + body).rstrip("\n") + "\n"


def roff(text: str) -> str:
    """Text as man(7) takes it: backslashes and hyphens escaped, no line taken for a request."""
    return "\n".join(("\\&" if line[:1] in ".'" else "") + line.replace("\\", "\\\\").replace("-", "\\-")
                     for line in text.strip("\n").splitlines())


def verbatim(text: str) -> str:
    """Lines kept as they are (examples), not filled."""
    return "\n".join([".nf", roff(text), ".fi"])


def environment(variables: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f".TP\n\\fB{roff(name)}\\fR\n{roff(meaning)}" for name, meaning in variables)


def manpage(parser: argparse.ArgumentParser, version: str) -> str:
    from argparse_manpage.manpage import Manpage  # the test extra's; only `make docs` and its test need it

    examples, _, statuses = (parser.epilog or "").partition("\nexit status: ")
    parser.epilog = None  # its parts are sections of their own (argparse-manpage would fill it as COMMENTS)
    page = Manpage(parser)
    page.date = ""  # no day of writing, so that the page is the same whenever it is written
    page.source = f"caliban-stream-translator {version}"
    page.manual = "User Commands"
    page.description = "translate a coding agent's event stream into stream-json"
    page.add_section("examples", "=", verbatim(examples.removeprefix("examples:\n")))
    page.add_section("exit status", "=", roff(" ".join(statuses.split())))
    page.add_section("environment", "=", environment(TRANSLATOR_ENVIRONMENT))
    page.add_section("see also", "=", "\\fBcaliban\\-claude\\fR(1), \\fBtranslator report \\-\\-help\\fR; "
                     f"docs/usage.md (every option in depth), {roff(INSTALLED_DOCS)}/usage.md once installed")
    return str(page)


def shim_manpage(usage: str, options: Mapping[str, Sequence[str]], version: str) -> str:
    """caliban-claude(1): its usage, what it reads of Claude Code's command line, examples, exit
    statuses, environment, files."""
    synopsis, _, description = usage.partition("\n\n")
    description = description.split("\n  ")[0]  # its examples and environment have sections here
    lines = [f'.TH CALIBAN\\-CLAUDE "1" "" "caliban\\-stream\\-translator {version}" "User Commands"',
             ".SH NAME", "caliban\\-claude \\- a claude\\-compatible command that runs caliban",
             ".SH SYNOPSIS", verbatim("\n".join(line.strip() for line in synopsis.removeprefix("usage: ").splitlines())),
             ".SH DESCRIPTION", roff(" ".join(description.split())),
             ".PP", roff("It reads Claude Code's command line as the Agent SDKs write it, tolerantly: an option it "
                         "does not know is warned about and skipped. What each option does on caliban: docs/shim.md."),
             ".SH OPTIONS"]
    for kind, names in options.items():
        lines += [".TP", f"\\fB{roff(kind)}\\fR", roff(", ".join(sorted(names, key=str.lower)))]
    lines += [".SH EXAMPLES", verbatim(SHIM_EXAMPLES), ".SH EXIT STATUS", roff(SHIM_STATUS),
              ".SH ENVIRONMENT", environment(SHIM_ENVIRONMENT),
              ".SH FILES", ".TP", "\\fB$CLAUDE_CONFIG_DIR/projects/<slug>/<session id>.jsonl\\fR",
              roff("each session's transcript, as Claude Code writes it (the SDKs' list_sessions and ccusage read "
                   "it); the slug is the working directory with every character but a letter or digit made -"),
              ".SH SEE ALSO", f"\\fBtranslator\\fR(1); docs/shim.md, {roff(INSTALLED_DOCS)}/shim.md once installed"]
    return "\n".join(lines) + "\n"


def write(folder: Path) -> None:
    """docs/cli.md, docs/translator.1 and docs/caliban-claude.1, into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    shim_flags = {"options with a value": sorted(flags.VALUE_FLAGS), "switches": sorted(flags.BOOL_FLAGS),
                  "short forms": [f"{short} ({long})" for short, long in flags.SHORT.items()]}
    # the installed docs' folder as its place under any prefix, not this machine's venv
    usage = USAGE.replace(DOCS, INSTALLED_DOCS)
    (folder / "cli.md").write_text(markdown([build_parser(), report.build_parser()], usage, shim_flags))
    (folder / "translator.1").write_text(manpage(build_parser(), __version__))
    (folder / "caliban-claude.1").write_text(shim_manpage(usage, shim_flags, __version__))


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"))
