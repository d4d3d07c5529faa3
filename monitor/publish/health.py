"""A model's rolling health figures (AUROC, accuracy) as the exporter and the API show
them.

Published only when computed from at least :data:`~monitor.core.privacy.SMALL_CELL`
records the health window has itself seen, and to
:data:`~monitor.core.privacy.RATE_DECIMALS`; *when* a new value replaces the released one
(0 or 11+ new records since) is the service's
:class:`~monitor.core.privacy.ReleaseBook`.
"""

from __future__ import annotations

from typing import NamedTuple

from monitor.core.drift import ModelHealth
from monitor.core.privacy import reportable, rounded_rate


class PublishedHealth(NamedTuple):
    """A model's released rolling AUROC and accuracy (None: undefined on its window)."""

    auroc: float | None
    accuracy: float | None


def published_health(h: ModelHealth) -> PublishedHealth | None:
    """``h``'s figures as they may leave the service now (None: withheld, fewer than 11
    records in the window it has seen).

    >>> import numpy as np
    >>> h = ModelHealth(window=100, auroc_engine="exact")
    >>> published_health(h) is None
    True
    >>> y = np.arange(40) % 2
    >>> h.update_many(y.astype(np.int8), y / 2 + 0.1, y.astype(np.int8))
    >>> published_health(h)
    PublishedHealth(auroc=1.0, accuracy=1.0)
    """
    held = min(h.n_seen, h.window)
    if not reportable(held):
        return None
    return PublishedHealth(rounded_rate(h.auroc), rounded_rate(h.accuracy))
