"""A published figure, typed: :class:`Shown` (the figure as it may leave) or
:class:`Withheld` (why it may not).

Why a type and not the text ``<11`` in its place: a figure replaced by text inside a
``dict`` has to be parsed back by every reader that computes with it (is this ``"<11"``
or a number? an ``"inf"``?), and a reader that forgets draws a withheld figure or fails
on a string. Here publication returns ``Shown(value) | Withheld(why)``; a reader matches
on it, and mypy makes it say what it does with a withheld one. The text ``<11`` is
written only where a published value leaves as text: the JSON and CSV writers, through
:mod:`monitor.publish.encode`.

>>> counts = [Shown(845), SMALL]
>>> [c.value if isinstance(c, Shown) else c.why.value for c in counts]
[845, 'fewer than 11 records']
>>> shown_or_none(SECONDARY), shown_or_none(Shown(0.5))
(None, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from monitor.core.privacy import SMALL_CELL

T = TypeVar("T")


class Why(Enum):
    """Why a figure is withheld."""

    #: computed from 1 to SMALL_CELL - 1 records (or from a window or cohort that small)
    SMALL_CELL = f"fewer than {SMALL_CELL} records"
    #: large enough itself, withheld so that a total minus the figures shown does not
    #: give a small one back (secondary suppression, monitor.core.privacy)
    SECONDARY = "secondary suppression"


@dataclass(frozen=True, slots=True)
class Shown(Generic[T]):
    """A figure as it may leave the service (rounded where the rule rounds it).

    Built as ``Shown(x)``, never ``Shown[int](x)``: on Python 3.11 a subscripted frozen
    slotted dataclass fails to set ``__orig_class__`` (a TypeError)."""

    value: T


@dataclass(frozen=True, slots=True)
class Withheld:
    """A figure that may not leave the service, and why."""

    why: Why = Why.SMALL_CELL


#: A published figure: shown as it may leave, or withheld (generic: ``Published[int]``).
Published = Shown[T] | Withheld

#: The two withheld values (one instance each: a Withheld has nothing but its reason).
SMALL = Withheld(Why.SMALL_CELL)
SECONDARY = Withheld(Why.SECONDARY)


def shown_or_none(p: Published[T]) -> T | None:
    """The figure of a shown value, None for a withheld one (what a reader that draws
    nothing in place of a withheld figure needs)."""
    return p.value if isinstance(p, Shown) else None
