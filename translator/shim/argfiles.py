"""Values too long for a command line, passed to caliban in files instead.

Linux takes one argument of at most 128 KiB (MAX_ARG_STRLEN) and all of them with the
environment of at most ARG_MAX: a 200 KB system prompt from the TypeScript SDK (which sends it
in `initialize`, not on argv) failed every run with "Argument list too long". caliban reads
each of these flags' values from a file too (`--system-file`, system_prompt.rs; `--settings`
and `--json-schema` take FILE_OR_JSON, loader.rs / schema.rs): a value longer than `INLINE`
goes in a file of the conversation's own folder (0700, made when first needed, removed at its
end), one file per distinct value.
"""

from __future__ import annotations

import os
import shutil

INLINE = 64 << 10  # bytes of a value kept on the command line: half the most one argument may have
FILE_FORMS = {"--system": "--system-file", "--settings": "--settings", "--json-schema": "--json-schema"}


class ArgFiles:
    def __init__(self) -> None:
        self.folder: str | None = None

    def fit(self, argv: list[str]) -> list[str]:
        """`argv` with each long value of a FILE_FORMS flag replaced by its file."""
        out = list(argv)
        for i in range(1, len(out) - 1):
            form = FILE_FORMS.get(out[i])
            if form is not None and len(out[i + 1].encode("utf-8", "surrogateescape")) > INLINE:
                out[i], out[i + 1] = form, self._file(out[i + 1])
        return out

    def _file(self, value: str) -> str:
        import hashlib  # (only here: most sessions never need it)

        if self.folder is None:
            import tempfile

            self.folder = tempfile.mkdtemp(prefix="caliban-claude-args-")
        data = value.encode("utf-8", "surrogateescape")
        path = os.path.join(self.folder, hashlib.sha256(data).hexdigest()[:32])
        if not os.path.exists(path):
            with open(path + ".tmp", "wb") as fh:
                fh.write(data)
            os.replace(path + ".tmp", path)
        return path

    def close(self) -> None:
        """The conversation's end: its files go."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
