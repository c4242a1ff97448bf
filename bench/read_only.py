"""The translator's reading alone, as a lower bound: the command's start-up (every module it
imports), its chunked reads and its typed, validating decode of every line (core/raw.py's
batch path), with no fold and no output. Whatever the fold and the encoders cost comes on top:
the difference between this and the parse-every-line floor is all they may take."""

import os
import sys

import translator.cli.command  # noqa: F401  (the start-up the command pays)
from translator.core.feed import CHUNK
from translator.model import DECODER

decode = DECODER.decode
tail = b""
while chunk := os.read(0, CHUNK):
    data = tail + chunk
    end = data.rfind(b"\n") + 1
    list(map(decode, data[:end].split(b"\n")[:-1]))
    tail = data[end:]
sys.exit(0 if not tail else 1)
