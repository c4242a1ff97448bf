"""Claude Code's flags that restrict what a session may do, and those that say where it runs:
mapped onto caliban's flags, or the run refused with one line (a restriction is never dropped)."""

from __future__ import annotations

from translator.shim.flags import ClaudeArgs

# Flags that say where or how the session runs, which caliban-claude cannot do: the run is
# refused (dropped, the prompt would run elsewhere than asked).
REFUSED = {
    **dict.fromkeys(("--background", "--desktop", "--tmux", "--teleport", "--remote-control",
                     "--remote-control-session-name-prefix", "--cloud", "--environment", "--from-pr"),
                    "Claude Code's interactive, desktop and cloud sessions are not caliban's"),
    "--worktree": "caliban-claude makes no git worktree (run it in one)",
}  # fmt: skip
# Restricted mode (Claude Code's --restricted): the built-in tools that run commands or code, and
# WebFetch, unless --tools names them (a sub-agent, whose tools are its own, too).
RESTRICTED_TOOLS = ("Bash", "BashOutput", "KillShell", "WebFetch", "AgentTool")
# Only these settings files then (and under --safe-mode): no user, project or local one.
OWN_SETTINGS = "managed,cli"


def restricting(args: ClaudeArgs, static: list[str], warnings: list[str]) -> None:
    """Claude Code's modes that turn things off, as caliban's flags (never dropped: what is not
    mapped is refused, see refusal). --restricted: the file tools fenced to the working
    directory, and its tools and settings (plan); --safe-mode: no skills, plugins or settings
    files but managed ones (whose hooks stay); --bare: no hooks or plugins."""
    if "--restricted" in args.flags:
        static.append("--restrict-paths")
    if args.flags & {"--safe-mode", "--disable-slash-commands"}:
        static.append("--no-skills")
    if args.flags & {"--safe-mode", "--bare"}:
        static.append("--no-plugins")
    if "--bare" in args.flags:
        static.append("--no-hooks")
    if args.flags & {"--safe-mode", "--bare"}:
        warnings.append("--safe-mode/--bare: caliban's own memory files (its CLAUDE.md) are still read")


ROOT = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"


def bypass_refused(mode: str, restricted: bool, root: bool, sandbox: str | None) -> str | None:
    """Claude Code's own line when it refuses bypassPermissions (as root unless IS_SANDBOX=1
    exactly, and in restricted mode), or None."""
    if mode != "bypassPermissions":
        return None
    if restricted:
        return "Error: bypassPermissions not supported in restricted mode"
    return ROOT if root and sandbox != "1" else None


def refusal(args: ClaudeArgs, mode: str, root: bool, sandbox: str | None) -> tuple[str, bool] | None:
    """The one line on which a run is refused for its flags, and whether it is Claude Code's
    own (its status 1; else ours, a usage error), or None. `mode`: the permission mode asked."""
    refused = bypass_refused(mode, "--restricted" in args.flags, root, sandbox)
    if refused is not None:
        return refused, True
    for flag, why in REFUSED.items():
        if args.has(flag):
            return f"caliban-claude: {flag}: {why}", False
    return None
