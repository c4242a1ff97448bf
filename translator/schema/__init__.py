"""The JSON Schemas the package ships: the output frames' typed model (frames.py) and their
generation (generate.py, `make schemas`)."""
