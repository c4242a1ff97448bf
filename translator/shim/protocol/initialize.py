"""The Agent SDK's `initialize` request, read into one typed value.

The TypeScript SDK sends much of a session's configuration here and never on argv
(`systemPrompt`, `appendSystemPrompt`, `agents`, `hooks`, the in-process MCP server names, and,
with `--await-initialize`, `mcpServers`, `settings`, `disallowedTools`, `managedSettings`).
Reading it once, tolerantly, gives every backend the same facts: a malformed field is left
out and named in `problems`, never fatal (the SDK waits for an answer either way).
"""

from __future__ import annotations

from typing import Any

import msgspec

# What the shim reads; every other key the SDK sent with a value is listed in `Initialize.other`.
KNOWN = frozenset(
    {
        "subtype", "systemPrompt", "appendSystemPrompt", "mcpServers", "settings", "disallowedTools",
        "managedSettings", "agents", "sdkMcpServers", "sdkMcpServerManifests", "jsonSchema", "hooks",
    }
)  # fmt: skip


class HookMatcher(msgspec.Struct, frozen=True):
    """One matcher of one hook event: the SDK calls back `callback_ids` (`hook_callback`)."""

    matcher: str | None
    callback_ids: tuple[str, ...]
    timeout: float | None = None
    on_failure: str | None = None  # "block": the SDK requires `hook_on_failure_supported`


class Initialize(msgspec.Struct, frozen=True, kw_only=True):
    """What one `initialize` request asked for. None: the field was not sent. (A Struct, as
    every class the shim builds at start: cheaper to define than a dataclass.)"""

    system_prompt: tuple[str, ...] | None = None  # the TS SDK's default is ("",): an empty prompt
    append_system_prompt: str | None = None
    mcp_servers: dict[str, dict[str, Any]] | None = None
    settings: dict[str, Any] | str | None = None  # an object, or a JSON text / file path
    disallowed_tools: tuple[str, ...] | None = None
    managed_settings: dict[str, Any] | str | None = None
    agents: dict[str, Any] | None = None
    sdk_mcp_servers: tuple[str, ...] = ()
    # The TS SDK's manifests of them: name → {initializeResult, toolsListResult} (its handshake, answered here)
    sdk_mcp_manifests: dict[str, dict[str, Any]] = {}
    json_schema: dict[str, Any] | None = None
    hooks: dict[str, tuple[HookMatcher, ...]] = {}
    other: tuple[str, ...] = ()  # other keys sent with a value, in the order sent
    problems: tuple[str, ...] = ()  # fields left out because they had the wrong shape

    @property
    def hooks_sent(self) -> bool:
        return any(self.hooks.values())

    @property
    def blocking_hooks(self) -> bool:
        """A hook asks to block its tool when the hook fails."""
        return any(m.on_failure == "block" for ms in self.hooks.values() for m in ms)


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _matchers(event: str, value: Any, problems: list[str]) -> tuple[HookMatcher, ...]:
    found: list[HookMatcher] = []
    for entry in value if isinstance(value, list) else []:
        ids = _strings(entry.get("hookCallbackIds")) if isinstance(entry, dict) else None
        if ids is None or not isinstance(entry, dict):
            problems.append(f"hooks.{event}: a matcher without hookCallbackIds")
            continue
        matcher, timeout, on_failure = entry.get("matcher"), entry.get("timeout"), entry.get("onFailure")
        found.append(
            HookMatcher(
                matcher if isinstance(matcher, str) else None,
                ids,
                float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool) else None,
                on_failure if isinstance(on_failure, str) else None,
            )
        )
    return tuple(found)


def read(request: dict[str, Any]) -> Initialize:
    """The typed value of an `initialize` request's body. Never raises."""
    problems: list[str] = []

    def typed(key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = request.get(key)
        if value is None:
            return None
        if not isinstance(value, kind):
            problems.append(f"{key}: expected {what}, ignored")
            return None
        return value

    system = request.get("systemPrompt")
    system_prompt = (system,) if isinstance(system, str) else _strings(system)
    if system is not None and system_prompt is None:
        problems.append("systemPrompt: expected a string or a list of strings, ignored")
    servers = typed("mcpServers", dict, "an object")
    if servers is not None:
        servers = {str(k): v for k, v in servers.items() if isinstance(v, dict)}
    disallowed = request.get("disallowedTools")
    disallowed_tools = _strings(disallowed)
    if disallowed is not None and disallowed_tools is None:
        problems.append("disallowedTools: expected a list of strings, ignored")
    hooks = typed("hooks", dict, "an object") or {}
    manifests = typed("sdkMcpServerManifests", dict, "an object") or {}
    return Initialize(
        system_prompt=system_prompt,
        append_system_prompt=typed("appendSystemPrompt", str, "a string"),
        mcp_servers=servers,
        settings=typed("settings", (dict, str), "an object or a string"),
        disallowed_tools=disallowed_tools,
        managed_settings=typed("managedSettings", (dict, str), "an object or a string"),
        agents=typed("agents", dict, "an object"),
        sdk_mcp_servers=_strings(request.get("sdkMcpServers")) or (),
        sdk_mcp_manifests={str(k): v for k, v in manifests.items() if isinstance(v, dict)},
        json_schema=typed("jsonSchema", dict, "an object"),
        hooks={str(event): _matchers(str(event), ms, problems) for event, ms in hooks.items()},
        other=tuple(k for k, v in request.items() if k not in KNOWN and v not in (None, [], {}, "")),
        problems=tuple(problems),
    )
