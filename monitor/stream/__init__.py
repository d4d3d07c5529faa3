"""The stream path: validation, the DuckDB store, windows, the pipeline, the evaluation worker."""
