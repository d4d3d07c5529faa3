"""vfr-monitor: fairness verdicts for deployed clinical models, and how far to trust them."""

__version__ = "0.1.0"
