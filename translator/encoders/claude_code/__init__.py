"""`--format claude-code`: pure frame builders (frames), block assembly (blocks), the session's
totals and result frames (session), the encoder."""

from translator.encoders.claude_code.encoder import ClaudeCodeEncoder

__all__ = ["ClaudeCodeEncoder"]
