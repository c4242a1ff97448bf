"""The shells: sources and sinks around the sans-I/O core (stdin and files, `--follow`,
`--listen`, `--out-dir`, `--metrics`). Only the CLI imports this package; nothing here is
imported by the core or the library API."""
