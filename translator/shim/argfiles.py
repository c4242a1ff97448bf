"""Values that must not be on caliban's command line, passed to caliban in files instead.

A command line is readable by every local user (`/proc/PID/cmdline`): the settings overlay
carries the MCP servers' definitions, whose `env` holds API tokens the app sent privately (in
`initialize`), so `--settings` always goes in a file. And Linux takes one argument of at most
128 KiB (MAX_ARG_STRLEN): a 200 KB system prompt from the TypeScript SDK failed every run with
"Argument list too long", so a value longer than `INLINE` goes in a file too. caliban reads
each of these flags' values from a file (`--system-file`, system_prompt.rs; `--settings` and
`--json-schema` take FILE_OR_JSON, loader.rs `parse_cli_overlay` / schema.rs: JSON unless the
path ends in `.toml`). The files (0600) are in a folder of the conversation's own (0700, made
when first needed, removed at its end), one file per distinct value.
"""

from __future__ import annotations

import os
import shutil

INLINE = 64 << 10  # bytes of a value kept on the command line: half the most one argument may have
FILE_FORMS = {"--system": "--system-file", "--settings": "--settings", "--json-schema": "--json-schema"}
PRIVATE = ("--settings",)  # flags whose value never goes on the command line, however short


class ArgFiles:
    def __init__(self) -> None:
        self.folder: str | None = None

    def fit(self, argv: list[str]) -> list[str]:
        """`argv` with each private or long value of a FILE_FORMS flag replaced by its file."""
        out = list(argv)
        for i in range(1, len(out) - 1):
            form = FILE_FORMS.get(out[i])
            if form is None:
                continue
            if out[i] in PRIVATE or len(out[i + 1].encode("utf-8", "surrogateescape")) > INLINE:
                out[i], out[i + 1] = form, self._file(out[i + 1])
        return out

    def _file(self, value: str) -> str:
        import hashlib  # (only here: most sessions never need it)

        if self.folder is None:
            import tempfile

            self.folder = tempfile.mkdtemp(prefix="caliban-claude-args-")  # (0700)
        data = value.encode("utf-8", "surrogateescape")
        path = os.path.join(self.folder, hashlib.sha256(data).hexdigest()[:32] + ".json")
        if not os.path.exists(path):
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with open(fd, "wb") as fh:
                fh.write(data)
            os.replace(path + ".tmp", path)
        return path

    def close(self) -> None:
        """The conversation's end: its files go."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
