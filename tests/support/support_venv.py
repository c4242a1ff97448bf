"""A virtual environment of its own for a Python client whose pins cannot share the test venv
(pydantic-ai-claude-code 0.8.1 needs pydantic-ai 1.x, whose MCP extra wants mcp < 2; the
test extra has mcp 2), installed by pip into a cache the first time, as npm_installed does
for the node clients."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path


def venv_installed(cache: Path, packages: list[str], bare: list[str]) -> Path:
    """`cache`'s venv's python, with `packages` installed and `bare` without their dependencies
    (a client that names more than it imports), each pinned. Under a lock on the cache: the
    suite's workers and other checkouts share it."""
    cache.mkdir(parents=True, exist_ok=True)
    python, mark = cache / "venv" / "bin" / "python", cache / "venv" / "installed.txt"
    wanted = "\n".join([*packages, "--no-deps", *bare]) + "\n"
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not mark.exists() or mark.read_text() != wanted:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(cache / "venv")], check=True, capture_output=True)
            pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, *packages], check=True, capture_output=True, timeout=900)
            subprocess.run([*pip, "--no-deps", *bare], check=True, capture_output=True, timeout=300)
            mark.write_text(wanted)
    return python
