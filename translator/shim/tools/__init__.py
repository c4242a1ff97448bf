"""The app's own tools: each in-process SDK MCP server (`create_sdk_mcp_server`,
`createSdkMcpServer`) reaches caliban as a stdio MCP server of the shim's (relay.py), whose
every JSON-RPC message the shim relays to the app as Claude Code does (`mcp_message`), gated by
the session's permission policy first (servers.py). See docs/shim.md, "The app's own tools"."""
