"""The shim's time limits on what it waits for, each with the ecosystem's default and an
environment variable (the SDKs pass `env` to the CLI): an app's hook callback, and a request to
`caliban mcp serve` (its write and its answer); and caliban's own limit on an MCP tool call,
which a relayed call's requests to the app must keep to. docs/shim.md, "Time limits"."""

from __future__ import annotations

import re
from collections.abc import Mapping

from translator.shim.say import warn

# Claude Code's: a hook runs at most 60 s unless its matcher's `timeout` says otherwise.
HOOK_S = 60.0
# The MCP SDKs' request timeout (DEFAULT_REQUEST_TIMEOUT_MSEC = 60000): a poll answers at once.
MCP_S = 60.0
# caliban's: an MCP tool call is given up after 60 s, no cancel sent (caliban-mcp-client manager.rs).
CALIBAN_TOOL_S = 60.0
_WHOLE = re.compile(r"\+?[0-9]+")  # Rust's u64 `parse`: ASCII digits, an optional `+`


def hook_timeout(env: Mapping[str, str]) -> float:
    """Seconds a hook callback may take when its matcher sets no `timeout` (`env`: the session's)."""
    return _seconds(env, "CALIBAN_CLAUDE_HOOK_TIMEOUT", HOOK_S)


def mcp_timeout(env: Mapping[str, str]) -> float:
    """Seconds one request to the server may take, from its first byte written to its answer."""
    return _seconds(env, "CALIBAN_CLAUDE_MCP_TIMEOUT", MCP_S)


def caliban_tool_timeout(env: Mapping[str, str]) -> float:
    """Seconds caliban waits for an MCP tool call before it reports the call failed (`env`: the
    one caliban is started with), read as caliban reads it (`duration_from_env`): whole seconds
    of CALIBAN_MCP_TOOL_TIMEOUT, else of MCP_TOOL_TIMEOUT, else 60; a value no u64 is skipped."""
    for name in ("CALIBAN_MCP_TOOL_TIMEOUT", "MCP_TOOL_TIMEOUT"):
        given = env.get(name, "")
        if _WHOLE.fullmatch(given) and int(given) < 1 << 64:
            return float(int(given))
    return CALIBAN_TOOL_S


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    given = env.get(name)
    if not given:
        return default
    try:
        value = float(given)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        warn(f"{name}={given}: expected a number of seconds above 0; {default:g} s it is")
        return default
    return value
