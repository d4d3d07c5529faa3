"""Benchmarks (`vfr-monitor bench ...`) and their synthetic inputs."""
