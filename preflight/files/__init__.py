"""Files preflight reads and writes: input files, output, paths, the cache, kept reports, TOML entries, JSON Schema helpers."""
