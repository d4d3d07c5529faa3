"""Scheduled batch axes of the VFR monitor (pure computations, no I/O)."""
