"""MkDocs hook: Sphinx cross-reference roles in docstrings read as plain code.

The code's docstrings use reST roles (``:func:`name```, ``:class:`...```); mkdocstrings
renders the backticked part as code but leaves the role's name in front of it
(":func:name"). This drops the role name, so the API reference reads as the source
means it. Registered in mkdocs.yml (``hooks``); the file is excluded from the site.
"""

from __future__ import annotations

import re

#: a role name right before the code element mkdocstrings made of its target
ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):(?=<code)")


def on_page_content(html: str, **_: object) -> str:
    return ROLE.sub("", html)
