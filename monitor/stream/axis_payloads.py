"""The scheduled axes' results: typed on the data path, JSON only in the store.

The service computes an Axis 2 result (one :class:`~batch_axes.axis2.Axis2Cell` per
cell), an :class:`~batch_axes.axis3.Axis3Result` or an
:class:`~batch_axes.equilense.EquiLenseResult`; the store's ``axis_results`` table
holds their ``to_dict`` as JSON. :func:`axis_payload` turns a result into that JSON
where it is written, :func:`axis_result` reads a stored payload back where it is
read (the pipeline's restart, the API, the report), so no layer reads a result
through string keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from batch_axes.axis2 import Axis2Cell
from batch_axes.axis3 import Axis3Result
from batch_axes.equilense import EquiLenseResult

#: What one scheduled-axis job produces for one model.
AxisResult = tuple[Axis2Cell, ...] | Axis3Result | EquiLenseResult


def axis_payload(result: AxisResult) -> Any:
    """The JSON-able payload the store writes for a result."""
    if isinstance(result, tuple):
        return [c.to_dict() for c in result]
    return result.to_dict()


@overload
def axis_result(axis: Literal["axis2"], payload: Any) -> tuple[Axis2Cell, ...]: ...
@overload
def axis_result(axis: Literal["axis3"], payload: Any) -> Axis3Result: ...
@overload
def axis_result(axis: Literal["equilense"], payload: Any) -> EquiLenseResult: ...
@overload
def axis_result(axis: str, payload: Any) -> AxisResult: ...
def axis_result(axis: str, payload: Any) -> AxisResult:
    """A stored payload of ``axis`` as its typed result (the inverse of :func:`axis_payload`)."""
    if axis == "axis2":
        return tuple(Axis2Cell.from_dict(c) for c in payload)
    if axis == "axis3":
        return Axis3Result.from_dict(payload)
    if axis == "equilense":
        return EquiLenseResult.from_dict(payload)
    raise ValueError(f"unknown scheduled axis {axis!r}")


def axis_results(axis: str, payloads: Mapping[str, Any]) -> dict[str, AxisResult]:
    """model_id -> typed result, for what ``latest_axis_results`` read from the store."""
    return {model_id: axis_result(axis, p) for model_id, p in payloads.items()}
