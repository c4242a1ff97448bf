"""The `caliban -p` backend of `caliban-claude`: one caliban process per user message, chained
with `--session`, its headless output translated as it arrives. See docs/shim.md."""
