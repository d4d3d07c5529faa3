"""Debian's headless Chromium on a report page: where elements land in the first viewport.

The page itself carries no script (it is mailed and archived as it is), so a copy of it
gets one small script that writes each element's bounding box, as the browser laid it
out in a ``WIDTH`` x ``HEIGHT`` window, into data attributes; ``--dump-dom`` returns the
DOM with them. What a board member sees first is then a fact the test reads, not a guess
from the HTML's order.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The first screen: a laptop's browser window.
WIDTH, HEIGHT = 1280, 800

_PROBE = """<script>
addEventListener("load", () => {
  document.body.setAttribute("data-vh", String(innerHeight));
  document.body.setAttribute("data-vw", String(innerWidth));
  for (const el of document.querySelectorAll("[data-kind]")) {
    const r = el.getBoundingClientRect();
    el.setAttribute("data-box", [r.top, r.bottom, r.left, r.right].join(","));
  }
});
</script>"""


@dataclass(frozen=True)
class Box:
    """An element of the "what changed" section (its data attributes) and its box in px."""

    attrs: dict[str, str]
    top: float
    bottom: float
    text: str

    def on_first_screen(self, height: float) -> bool:
        return self.top >= 0 and self.bottom <= height


def _base(profile: Path) -> list[str]:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (make system-deps installs it)"
    return [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{HEIGHT}"]  # fmt: skip


def first_screen(page: str, work: Path) -> tuple[float, list[Box]]:
    """The viewport height and every ``[data-kind]`` element's box, laid out by Chromium
    in a WIDTH x HEIGHT window."""
    probe = work / "probe.html"
    probe.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    run = subprocess.run(
        [*_base(work / "profile"), "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    vh = re.search(r'<body[^>]*data-vh="(\d+)"', dom)
    assert vh, "the probe script did not run"
    boxes = []
    for m in re.finditer(r"<(li|p)\b([^>]*\bdata-box=\"[^\"]+\"[^>]*)>(.*?)</\1>", dom, re.S):
        attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', m.group(2)))
        top, bottom, _, _ = (float(x) for x in attrs["data-box"].split(","))
        text = re.sub(r"<[^>]+>", "", m.group(3))
        boxes.append(Box(attrs, top, bottom, " ".join(text.split())))
    return float(vh.group(1)), boxes


def screenshot(page: str, work: Path, out: Path) -> Path:
    """A PNG of the page's first WIDTH x HEIGHT screen."""
    html = work / "shot.html"
    html.write_text(page, encoding="utf-8")
    run = subprocess.run(
        [*_base(work / "profile-shot"), f"--screenshot={out}", html.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return out
