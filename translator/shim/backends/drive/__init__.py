"""The drive backend of `caliban-claude`: one `caliban mcp serve` per shim session (ADR 0055),
for Agent SDK apps that gate tools (`can_use_tool`) or watch them with hook callbacks, which
`caliban -p` has no channel for. See docs/shim.md, "Permissions and hooks"."""
