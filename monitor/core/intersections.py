"""What an intersection attribute is made of, taken from the configuration.

An intersection (``[[intersections]] attributes = ["race", "sex"]``) is audited as an
attribute of its own, ``race_x_sex``, whose groups are every combination of its parents'
groups in mixed-radix order (the first parent varies slowest:
:func:`monitor.config.intersection_groups`, :func:`monitor.core.tables.grid_groups`).

Why this type: pooled estimates and the combined groups shown within a cell's lowest group
need each combined group's parent groups. They were once recovered by splitting group
names on ``" x "``, while the service and the audit code groups as ``"2:1"``: on a
configured intersection nothing split, and pooling silently never applied. The parents
now come from the configuration, by position, and are never parsed out of a name.

>>> race_x_sex = Intersection("race_x_sex", ("race", "sex"), (("2", "3", "5"), ("0", "1")))
>>> race_x_sex.groups
('2:0', '2:1', '3:0', '3:1', '5:0', '5:1')
>>> race_x_sex.parent_index().tolist()
[[0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]]
>>> race_x_sex.parent_groups_of("race")
('2', '2', '3', '3', '5', '5')

Built from a configuration by :func:`monitor.config.engine.intersections_of`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from monitor.core.method import INTERSECTION_CODE_SEP


@dataclass(frozen=True, slots=True)
class Intersection:
    """An audited attribute whose groups combine the groups of two or three parents.

    ``parent_codes[a]`` are parent ``parents[a]``'s group codes in configured order; the
    intersection's groups are their product in that order (first parent slowest).
    """

    name: str
    parents: tuple[str, ...]
    parent_codes: tuple[tuple[str, ...], ...]

    @property
    def groups(self) -> tuple[str, ...]:
        """The combined groups' codes, in the order of the intersection's count table."""
        return tuple(
            INTERSECTION_CODE_SEP.join(combo) for combo in itertools.product(*self.parent_codes)
        )

    def parent_index(self) -> np.ndarray:
        """(A, G) int64: the position of combined group g's group within parent a."""
        sizes = [len(c) for c in self.parent_codes]
        g = np.arange(math.prod(sizes), dtype=np.int64)
        out = np.empty((len(sizes), len(g)), dtype=np.int64)
        stride = 1
        for a in range(len(sizes) - 1, -1, -1):
            out[a] = (g // stride) % sizes[a]
            stride *= sizes[a]
        return out

    def parent_groups_of(self, parent: str) -> tuple[str, ...]:
        """Each combined group's group code in ``parent`` (one of :attr:`parents`)."""
        a = self.parents.index(parent)
        codes = self.parent_codes[a]
        return tuple(codes[i] for i in self.parent_index()[a].tolist())

    def check_table(self, groups: Sequence[str]) -> None:
        """Refuse a count table whose groups are not this intersection's combinations in
        order: its figures would be assigned to the wrong parents."""
        if tuple(groups) != self.groups:
            raise ValueError(
                f"the count table of intersection {self.name!r} has {len(groups)} groups that "
                f"are not the {len(self.groups)} combinations of {' x '.join(self.parents)} "
                "in configured order: build intersection tables from the same configuration "
                "(monitor.core.tables.tables_from_frame)"
            )


def parents_by_name(intersections: Mapping[str, Intersection]) -> dict[str, tuple[str, ...]]:
    """name -> parent attribute names, the form :func:`monitor.core.privacy.linked_withheld`
    takes."""
    return {name: i.parents for name, i in intersections.items()}
