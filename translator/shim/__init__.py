"""`caliban-claude`: a `claude`-compatible CLI in front of caliban, for the Claude Agent SDKs.

The SDKs spawn the `claude` CLI and talk stream-json plus a control protocol with it. This
package speaks that protocol on stdin/stdout, runs one `caliban -p -` per user message
(chained with `--session`), and writes caliban's output back as Claude Code frames through the
project's own translation. See docs/shim.md and shared/spec/claude-cli-shim.md.
"""
