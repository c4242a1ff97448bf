"""The sans-I/O core: bytes of one input stream in, output frames and diagnostics out
(translator.py); the readers of both dialects (raw.py, headless.py), the run fold (fold.py) and
what it is made of. No I/O, no clocks read, no globals."""
