"""The TS SDK's `prewarm()` + `claim()` (@anthropic-ai/claude-agent-sdk 0.3.333, `SpareProcess`):
the SDK starts the CLI with `--await-claim` in a parking folder of its own, before the session's
folder is known; `claim()` then sends `claim_session` (`cwd`, and `permission_mode`, `env`,
`additional_directories`, `append_system_prompt`, `title`, `agents`, `workspace_trust`,
`sdk_mcp_servers`, `include_initialize`) and, at once, the prompt. The claimed folder is the
session's (its runs', its session file's); what cannot be honoured refuses the claim, failing
closed as the CLI does (the SDK rejects `claimed` and the prompt gets a `not_claimed` result),
so no prompt runs in the parking folder or under another mode than the one asked for."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from translator.shim.place import Place

# The only environment a claim may bring (the SDK's ClaimOptions.env): Claude's own tokens and
# the host's session id, which caliban does not read.
CLAIM_ENV = frozenset({"CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_SESSION_ACCESS_TOKEN", "CLAUDE_CODE_HOST_SESSION_ID"})
NOT_CLAIMED = "not_claimed: this session was started with --await-claim and has not been claimed; nothing was run"
IGNORED = {
    "additional_directories": "caliban has no extra directories",
    "title": "caliban-claude keeps no session titles",
    "agents": "SDK agents cannot be passed to caliban (no named sub-agent types)",
}


@dataclass(frozen=True)
class Claim:
    """A claim the session can honour: its folder, its mode (None: unchanged), the text that
    goes before its first message (`append_system_prompt`: caliban has none), and what is said."""

    cwd: str
    mode: str | None = None
    prefix: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class Spare:
    """A session started with `--await-claim`: parked until it is claimed, claimed once."""

    waiting: bool
    parked_at: float = field(default_factory=time.monotonic)

    def read(self, request: dict[str, Any], mode_refused: Callable[[str], str | None], place: Place) -> Claim | str:
        """The claim, or why it is refused (the SDK's reason first: `claim_failed`,
        `permission_mode_not_claimable`). `mode_refused`: why the session cannot take a mode;
        `place`: the session's (its folder, where a relative `cwd` is from; `~`: its HOME)."""
        if not self.waiting:
            return "claim_failed: this session is not a parked spare (started without --await-claim, or claimed)"
        cwd = request.get("cwd")
        if not isinstance(cwd, str) or not cwd.strip():
            return "claim_failed: cwd must be a folder's path"
        folder = place.path(cwd)
        if not os.path.isdir(folder):
            return f"claim_failed: {folder}: no such folder"
        env = request.get("env") or {}
        if not isinstance(env, dict):
            return "claim_failed: env must be an object"
        if foreign := sorted(set(env) - CLAIM_ENV):
            return f"claim_failed: env {', '.join(foreign)} cannot be set at claim"
        mode = request.get("permission_mode")
        if mode is not None and (not isinstance(mode, str) or (why := mode_refused(mode)) is not None):
            return f"permission_mode_not_claimable: {why if isinstance(mode, str) else repr(mode)}"
        append = request.get("append_system_prompt")
        warnings = [f"claim: {key} ignored ({why})" for key, why in IGNORED.items() if request.get(key)]
        self.waiting = False
        return Claim(folder, mode, append if isinstance(append, str) else "", warnings)

    def answer(self, claim: Claim, session_id: str) -> dict[str, Any]:
        """The claim's answer as the SDK reads it (`cwd`, `session_id`, `parked_ms`,
        `sdk_mcp_settled`); no `initialize`: the one answered at the start stays true."""
        parked_ms = int((time.monotonic() - self.parked_at) * 1000)
        return {"cwd": claim.cwd, "session_id": session_id, "parked_ms": parked_ms, "sdk_mcp_settled": True}
