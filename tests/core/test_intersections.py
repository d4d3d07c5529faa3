"""An intersection's parts come from the configuration, by position.

Oracle: a combined group's parent codes read back from its code string, which the
configuration builds by joining the parents' codes with ":" (codes contain no ":" when
the joins are unique: monitor.config checks) - the test may split what the product must
not.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.config import config_from_mapping
from monitor.config.engine import intersections_of
from monitor.core.intersections import Intersection

codes = st.lists(st.text("abcdefgh0123456789", min_size=1, max_size=3), min_size=2, max_size=4,
                 unique=True)  # fmt: skip


@given(parts=st.lists(codes, min_size=2, max_size=3))
def test_parent_index_equals_the_codes_split_back(parts):
    inter = Intersection("x", tuple(f"p{i}" for i in range(len(parts))), tuple(map(tuple, parts)))
    split = [g.split(":") for g in inter.groups]
    assert len(split) == len(set(inter.groups))
    index = inter.parent_index()
    for a, own in enumerate(parts):
        assert [own[i] for i in index[a].tolist()] == [p[a] for p in split]
        assert list(inter.parent_groups_of(f"p{a}")) == [p[a] for p in split]


def test_intersections_of_a_configuration_match_its_grid_attributes():
    cfg = config_from_mapping(
        {"intersections": [{"attributes": ["race", "sex"]},
                           {"attributes": ["race", "sex", "age_group"]}]}
    )  # fmt: skip
    inters = intersections_of(cfg)
    assert list(inters) == ["race_x_sex", "race_x_sex_x_age_group"]
    grid = {a.name: a.codes for a in cfg.grid_attributes}
    for name, inter in inters.items():
        assert inter.groups == grid[name]
        assert inter.parents == tuple(name.split("_x_"))


def test_a_table_of_other_groups_is_refused_with_what_to_do():
    inter = Intersection("race_x_sex", ("race", "sex"), (("B", "W"), ("F", "M")))
    inter.check_table(["B:F", "B:M", "W:F", "W:M"])
    with pytest.raises(ValueError, match="build intersection tables from the same configuration"):
        inter.check_table(["B x F", "B x M", "W x F", "W x M"])
