"""The `initialize` request's fields mapped onto the caliban runs, as their argv forms are.

The TypeScript SDK checks the answer: `settings_applied`, `disallowed_tools_applied` and
`managed_settings_applied` must be `true` (or it ends the session), `mcp_servers_applied` must be
a boolean. Each is `true` only when all of that field reached caliban; what did not is warned.
"""

from __future__ import annotations

import json

from translator.shim.mapping import AGENTS, Plan, convert_rule, mcp_overlay, merge, settings_overlay, system_flags
from translator.shim.protocol.initialize import Initialize

HOOKS = "SDK hook callbacks cannot be bridged: caliban -p will not call them"


def apply(p: Plan, init: Initialize) -> tuple[dict[str, bool], list[str]]:
    """Change the plan (before the first run); the answer's `*_applied` keys, and the warnings."""
    warnings = [f"initialize: {problem}" for problem in init.problems]
    applied: dict[str, bool] = {}
    if init.system_prompt is not None:
        p.system = system_flags("\n\n".join(s for s in init.system_prompt if s), p.keep_system_prompt)
    if init.append_system_prompt:
        p.prefix = init.append_system_prompt
        warnings.append("appendSystemPrompt: caliban has no appended system prompt; it goes before the first message")
    if init.mcp_servers is not None:
        servers, applied["mcp_servers_applied"] = mcp_overlay(init.mcp_servers, warnings, p.sdk_servers)
        merge(p.overlay, {"mcp_servers": servers})
    if init.settings is not None:
        overlay, applied["settings_applied"] = settings_overlay(init.settings, "settings", warnings, p)
        merge(p.overlay, overlay)
    if init.disallowed_tools is not None:
        p.static += [a for rule in init.disallowed_tools for a in ("--deny", convert_rule(rule))]
        applied["disallowed_tools_applied"] = True
    if init.managed_settings is not None:
        overlay, applied["managed_settings_applied"] = settings_overlay(
            init.managed_settings, "managedSettings", warnings, p
        )
        merge(p.overlay, overlay)
    if init.json_schema is not None and p.json_schema is None:
        p.json_schema = json.dumps(init.json_schema, separators=(",", ":"))
    if init.hooks_sent:
        warnings.append(HOOKS)
    if init.agents:
        warnings.append(f"{AGENTS}; {', '.join(sorted(init.agents))} ignored")
    p.sdk_servers += [name for name in init.sdk_mcp_servers if name not in p.sdk_servers]
    if init.other:
        warnings.append(f"initialize: {', '.join(init.other)} not supported by caliban; ignored")
    return applied, warnings
