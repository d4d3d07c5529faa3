"""Data the product generates or ships: the synthetic cohort, the demo scorer, real-data loaders."""
