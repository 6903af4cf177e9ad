"""Where the pages' files live: `STATIC`, the package's own folder of HTML, JavaScript and CSS (package data)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["STATIC"]

#: The folder of the explorer's pages and assets (package data).
STATIC = Path(__file__).parent / "static"
