"""The exit statuses of the package's commands, from sysexits.h, defined once: what a status
means is said here, and every command (`translator`, `translator report`, `caliban-claude`)
returns these names, never a bare number."""

from __future__ import annotations

EX_OK = 0  # done; bad lines were reported and skipped (--on-invalid report)
EX_USAGE = 64  # the command line is wrong
EX_DATAERR = 65  # the input is bad (--on-invalid fail, a compression bomb, a corrupt stream)
EX_NOINPUT = 66  # an input cannot be opened or read
EX_UNAVAILABLE = 69  # an optional dependency (an extra) is not installed
EX_SOFTWARE = 70  # a bug: the translator itself failed
EX_OSERR = 71  # the system refused (no memory, no file descriptors)
EX_CANTCREAT = 73  # an output cannot be created
EX_IOERR = 74  # reading or writing failed
EX_CONFIG = 78  # the configuration is wrong (a rate card)
