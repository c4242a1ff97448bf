"""`--format claude-code`: pure frame builders (frames), block assembly (blocks), the encoder."""

from translator.encoders.claude_code.encoder import ClaudeCodeEncoder

__all__ = ["ClaudeCodeEncoder"]
