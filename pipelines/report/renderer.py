"""Render ``ReportData`` as one self-contained HTML page or as Markdown (jinja2 templates)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import jinja2
from markupsafe import Markup

from .. import __version__
from . import charts
from .data import ReportData
from .sanitize import md_escape, sanitize, slug

MAX_BYTES = 3_000_000
MD_MAX_JOBS = 50  # user and scheduler failures listed in the Markdown variant (every infrastructure one is)
MD_MAX_POSTMORTEMS = 20  # postmortems in the Markdown variant: every infrastructure failure, then the costliest others
SHOWN_DRAIN = 8  # rows of the do-first tables on the first screen; the rest are folded
SHOWN_INFRA = 10


def _num(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "\u2014"
    if isinstance(v, float) and math.isinf(v):
        return "\u221e"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def _pct(v: Any) -> str:
    return "\u2014" if v is None else f"{100 * v:.1f}%"


def _delta(v: Any) -> str:
    if v is None:
        return "\u2014"
    if math.isinf(v):
        return "new"
    sign = "+" if v >= 0 else "\u2212"
    return f"{sign}{abs(100 * v):.0f}%"


def _ts(v: Any) -> str:
    if v is None:
        return "\u2014"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc)
        return v.strftime("%Y-%m-%d %H:%M:%SZ")
    return str(v)


def _hms(v: Any) -> str:
    if not isinstance(v, dt.datetime):
        return "\u2014" if v is None else str(v)
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc)
    return v.strftime("%m-%d %H:%M:%SZ")


def _p(v: Any) -> str:
    return "\u2014" if v is None else f"{v:.2g}"


def _known(entries: list[dict[str, Any]] | None) -> str:
    """The known issues of a do-first row or signature, with ticket and status; else ``new``."""
    if not entries:
        return "new"
    parts = []
    for e in entries:
        extra = ", ".join(x for x in (e.get("ticket") and f"ticket {e['ticket']}", e.get("status")) if x)
        parts.append(f"{e['known_issue_id']} ({extra})" if extra else e["known_issue_id"])
    return "; ".join(parts)


def _html_finalize(value: Any) -> Any:
    # every {{ }} string passes through sanitize before autoescape; our own Markup does not
    if isinstance(value, str) and not isinstance(value, Markup):
        return sanitize(value)
    return value


def _md_finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return str(value)
    if isinstance(value, str):
        return md_escape(value)
    return value


def _env(kind: str) -> jinja2.Environment:
    loader = jinja2.PackageLoader("faultline.report", "templates")
    if kind == "html":
        env = jinja2.Environment(
            loader=loader,
            autoescape=True,
            finalize=_html_finalize,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
    else:
        env = jinja2.Environment(
            loader=loader,
            autoescape=False,
            finalize=_md_finalize,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
    env.filters.update(
        num=_num,
        pct=_pct,
        delta=_delta,
        ts=_ts,
        hms=_hms,
        p=_p,
        known=_known,
        bar=charts.bar_width,
        heat=charts.heat_colour,
        slug=slug,
        one_line=lambda v, n=None: sanitize(v, keep_newlines=False, max_len=n),
    )
    return env


def context(data: ReportData, max_jobs: int | None = None) -> dict[str, Any]:
    jobs = data.jobs if max_jobs is None else data.jobs[:max_jobs]
    causes_top = max([c["failed_jobs"] for c in data.causes] + [0])
    hours_top = max([c["gpu_hours_lost"] for c in data.causes] + [0.0])
    return {
        "d": data,
        "jobs": jobs,
        "shown_drain": SHOWN_DRAIN,
        "shown_infra": SHOWN_INFRA,
        "version": __version__,
        "intervals": charts.intervals(data.scoreboard),
        "timeline": charts.timeline(data.daily, data.day),
        "heatmaps": [{**h, "svg": charts.heatmap(h, data.covered_days, data.day)} for h in data.heatmaps],
        "causes_top": causes_top,
        "hours_top": hours_top,
        "heat_colours": charts.HEAT_COLOURS,
    }


def render_html(data: ReportData, max_bytes: int = MAX_BYTES) -> str:
    """The page; if it would pass ``max_bytes``, fewer user and scheduler failures (and their
    postmortems) until it fits. Every infrastructure failure stays."""
    template = _env("html").get_template("report.html.j2")
    n = len(data.jobs)
    while True:
        page = template.render(**context(data, n), shown_jobs=n)
        if len(page.encode("utf-8")) <= max_bytes or n == 0:
            return page
        n = n // 2 if n > 1 else 0


def render_markdown(data: ReportData) -> str:
    """Markdown for a ticket: every infrastructure failure (and its postmortem), the costliest
    other failures."""
    template = _env("md").get_template("report.md.j2")
    ctx = context(data, MD_MAX_JOBS)
    others = max(MD_MAX_POSTMORTEMS - len(data.infra_jobs), 0)
    return template.render(
        **ctx, shown_jobs=min(len(data.jobs), MD_MAX_JOBS), postmortems=data.infra_jobs + data.jobs[:others]
    )
