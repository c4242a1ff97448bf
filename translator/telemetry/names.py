"""Claude Code's telemetry names, as the CLI 2.1.333 sends them (fixtures/cc-2.1.333/otel/):
scopes, metrics with their units and descriptions, and the values caliban has no figure of
its own for, which keep Claude Code's (so a dashboard's filters and groupings still match)."""

from __future__ import annotations

from translator.version import CLAUDE_CODE

CLAUDE_CODE_VERSION = CLAUDE_CODE  # the CLI whose export this reproduces
METER_SCOPE = "com.anthropic.claude_code"
EVENTS_SCOPE = "com.anthropic.claude_code.events"
TRACER_SCOPE = "com.anthropic.claude_code.tracing"
TRACER_VERSION = "1.0.0"

# name -> (unit, description); all monotonic sums (counters)
SESSIONS = "claude_code.session.count"
COST = "claude_code.cost.usage"
TOKENS = "claude_code.token.usage"
ACTIVE = "claude_code.active_time.total"
METRICS = {
    SESSIONS: ("", "Count of CLI sessions started"),
    COST: ("USD", "Cost of the Claude Code session"),
    TOKENS: ("tokens", "Number of tokens used"),
    ACTIVE: ("s", "Total active time in seconds"),
}

REDACTED = "<REDACTED>"
# What caliban's events do not say, at Claude Code's values for a run under an SDK: no
# effort setting, the main loop's queries, no permission prompt (a tool that ran was allowed).
EFFORT = "medium"
METRIC_QUERY_SOURCE = "main"
EVENT_QUERY_SOURCE = "sdk"
SPEED = "normal"
DECISION, DECISION_SOURCE, PERMISSION_MODE = "accept", "config", "default"
PROVIDER = "anthropic"  # gen_ai.provider.name / gen_ai.system
FIRST_PARTY = "firstParty"  # anthropic.provider
