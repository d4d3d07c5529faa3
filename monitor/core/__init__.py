"""Core statistics: count tables, metrics, Axis 1, tiers, events, drift. No I/O."""
