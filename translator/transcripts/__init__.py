"""Claude Code's session files for the runs translated or served (`--transcripts DIR`, and the
shim's under `$CLAUDE_CONFIG_DIR`): `lines.py` makes the lines, `files.py` writes them."""
