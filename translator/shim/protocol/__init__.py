"""The app's side of a session, as claude-agent-sdk's transport and `Query` are the CLI's: the
stdin lines (stdin.py), the one registry of the shim's pending requests (channel.py), the SDK's
`initialize` read (initialize.py), and every frame the shim writes itself (frames.py)."""
