"""Record-level oracles: slow, obviously correct implementations of what the fast paths compute.

Tests and benchmarks compare the fast paths with them; production code never imports
them (an import-linter contract in ``make test`` says so).
"""
