"""The README's Texas-100X audit config works on a file in the Texas-100X layout.

Why: a newcomer copies that block first; it must map every PAT_AGE band the loader maps
(and leave code 23 out, as the loader does), and `vfr-monitor audit` must accept it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from monitor.cli import main
from monitor.data.datasets.texas100x import PAT_AGE_CODES
from tests.support.texas_frames import clean_texas_frame

README = Path(__file__).resolve().parents[2] / "README.md"


def _texas_block() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("[input]\nscore_columns")
    return text[start : text.index("```", start)]


def test_readme_age_codes_are_the_loaders() -> None:
    cfg = tomllib.loads(_texas_block())
    want = {str(k): v for k, v in PAT_AGE_CODES.items() if isinstance(k, int) and v is not None}
    assert cfg["input"]["codes"]["age_group"] == want
    assert "23" not in cfg["input"]["codes"]["age_group"]


def test_readme_texas_config_audits_a_texas_layout_file(tmp_path, capsys) -> None:
    config = tmp_path / "texas.toml"
    config.write_text(_texas_block(), encoding="utf-8")
    frame = clean_texas_frame(n=6_000)
    frame = frame[frame["PAT_AGE"] != "23"]
    frame["p_xgb"] = np.random.default_rng(0).random(len(frame))
    data = tmp_path / "scored.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out"
    assert main(["audit", "--input", str(data), "--config", str(config), "--out", str(out),
                 "--quiet"]) == 0  # fmt: skip
    assert (out / "cells.csv").exists()
    assert "age_group" in capsys.readouterr().out
