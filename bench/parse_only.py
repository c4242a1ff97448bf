"""The floor the translator is measured against: parse every line of stdin with orjson."""

import sys

import orjson

loads = orjson.loads
for line in sys.stdin.buffer:
    loads(line)
