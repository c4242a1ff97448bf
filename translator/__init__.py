"""translator: a coding agent's raw events in, Claude-Code-compatible stream-json out.

The library API (see docs/library.md): `translate()` for a whole input,
`Stream` for a live one.
"""

from translator.api import FORMATS, Clock, Format, Frame, Stream, StreamOptions, translate, translate_bytes
from translator.core.rates import RateCard
from translator.version import __version__

__all__ = [
    "FORMATS",
    "Clock",
    "Format",
    "Frame",
    "RateCard",
    "Stream",
    "StreamOptions",
    "__version__",
    "translate",
    "translate_bytes",
]
