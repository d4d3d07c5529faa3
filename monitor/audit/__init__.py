"""The offline audit: input mapping of a scored cohort file and the batch run of every axis.

``from monitor.audit import audit_frame`` is the Python API (:mod:`monitor.audit.frame`),
imported on first use so that importing one audit module does not load them all. (Not
re-exported from ``monitor`` itself: modules below this layer import ``monitor`` for its
version, and the layer contract forbids that chain.)
"""

from typing import Any

__all__ = ["audit_frame"]


def __getattr__(name: str) -> Any:
    if name == "audit_frame":
        from monitor.audit.frame import audit_frame

        return audit_frame
    raise AttributeError(f"module 'monitor.audit' has no attribute {name!r}")
