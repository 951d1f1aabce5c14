"""The nightly report: one self-contained HTML page (or Markdown) per night of a warehouse:
``build_report("warehouse", "out/report.html")`` for the latest night, or with ``fmt="md"`` and
``day=datetime.date(2026, 11, 3)`` (docs/queries.md)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from .sanitize import md_escape, sanitize, slug

__all__ = ["build_report", "build_reports", "render", "render_all", "sanitize", "md_escape", "slug"]


def render_all(warehouse: str | os.PathLike, day: dt.date | None = None, fmts=("html", "md")) -> dict[str, str]:
    """The report text in each of ``fmts`` for ``day`` (default: the last day in the
    warehouse), from one read of the warehouse."""
    from ..lake import queries
    from ..lake.files import warehouse_root as lake_location
    from .data import load
    from .renderer import render_html, render_markdown

    bad = [f for f in fmts if f not in ("html", "md")]
    if bad:
        raise ValueError(f"unknown report format {bad[0]!r} (html or md)")
    con = queries.connect(warehouse)
    try:
        data = load(con, str(lake_location(warehouse)), day)
    finally:
        con.close()
    return {f: render_html(data) if f == "html" else render_markdown(data) for f in fmts}


def render(warehouse: str | os.PathLike, day: dt.date | None = None, fmt: str = "html") -> str:
    """The report text for ``day`` (default: the last day in the warehouse)."""
    return render_all(warehouse, day, (fmt,))[fmt]


def build_report(
    warehouse: str | os.PathLike, out: str | os.PathLike, day: dt.date | None = None, fmt: str = "html"
) -> Path:
    """Write the report to ``out`` (atomically: a temporary sibling, then a rename; a URL
    or ``storage.ObjectPath``: one object PUT)."""
    return build_reports(warehouse, {fmt: out}, day)[fmt]


def build_reports(warehouse: str | os.PathLike, outs: dict, day: dt.date | None = None) -> dict:
    """Write the report in each format of ``outs`` (format -> file) from one read of the
    warehouse; the paths written, by format."""
    from ..lake.files import atomic_write_text
    from ..lake.storage import is_url

    texts = render_all(warehouse, day, tuple(outs))
    return {f: atomic_write_text(out if is_url(out) else Path(out), texts[f]) for f, out in outs.items()}
