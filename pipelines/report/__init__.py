"""The nightly report: one self-contained HTML page (or Markdown) per night of a warehouse:
``build_report("warehouse", "out/report.html")`` for the latest night, or with ``fmt="md"`` and
``day=datetime.date(2026, 11, 3)`` (docs/queries.md)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from .sanitize import md_escape, sanitize, slug

__all__ = ["build_report", "render", "sanitize", "md_escape", "slug"]


def render(warehouse: str | os.PathLike, day: dt.date | None = None, fmt: str = "html") -> str:
    """The report text for ``day`` (default: the last day in the warehouse)."""
    from ..lake import queries
    from ..lake.files import warehouse_root as lake_location
    from .data import load
    from .renderer import render_html, render_markdown

    if fmt not in ("html", "md"):
        raise ValueError(f"unknown report format {fmt!r} (html or md)")
    con = queries.connect(warehouse)
    try:
        data = load(con, str(lake_location(warehouse)), day)
    finally:
        con.close()
    return render_html(data) if fmt == "html" else render_markdown(data)


def build_report(
    warehouse: str | os.PathLike, out: str | os.PathLike, day: dt.date | None = None, fmt: str = "html"
) -> Path:
    """Write the report to ``out`` (atomically: a temporary sibling, then a rename; a URL
    or ``storage.ObjectPath``: one object PUT)."""
    from ..lake.files import atomic_write_text
    from ..lake.storage import is_url

    return atomic_write_text(out if is_url(out) else Path(out), render(warehouse, day, fmt))
