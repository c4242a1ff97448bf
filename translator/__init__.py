"""translator: a coding agent's raw events in, Claude-Code-compatible stream-json out."""

__version__ = "0.1.0"
