"""Geometry of the report's inline SVG charts: numbers only; the templates draw (and escape)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

HEAT_COLOURS = ("#eef1f4", "#fdd49e", "#fc8d59", "#e34a33", "#b30000")  # 0, 1, 2, 3-4, 5+ incidents


def nice_max(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten that is >= value (1 for nothing)."""
    if not value or value <= 0 or not math.isfinite(value):
        return 1.0
    exp = math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10**exp >= value * (1 - 1e-12):
            return m * 10**exp
    return 10 ** (exp + 1)  # pragma: no cover


def ticks(top: float, n: int = 4) -> list[float]:
    return [top * i / n for i in range(n + 1)]


def fmt_tick(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.2g}"


def intervals(rows: list[dict[str, Any]], width: int = 260, pad: int = 8) -> dict[str, Any]:
    """Point + 95% whisker per scoreboard row on one shared linear scale."""
    top = nice_max(max([r.get("ci_high") or 0 for r in rows] + [r.get("rate_per_1k") or 0 for r in rows] + [0]))
    span = width - 2 * pad

    def x(v):
        return round(pad + span * min(max(v or 0.0, 0.0), top) / top, 1)

    marks = []
    for r in rows:
        marks.append(
            {
                "x_lo": x(r.get("ci_low")),
                "x_hi": x(r.get("ci_high")),
                "x": x(r.get("rate_per_1k")),
                "open": (r.get("ci_high") or 0) > top,
            }
        )
    return {
        "width": width,
        "top": top,
        "marks": marks,
        "ticks": [{"x": x(t), "label": fmt_tick(t)} for t in ticks(top)],
    }


def bar_width(value: float | None, top: float, width: int = 160) -> float:
    if not value or top <= 0:
        return 0.0
    return round(width * min(value / top, 1.0), 1)


def timeline(daily: list[dict[str, Any]], day: dt.date, width: int = 900) -> dict[str, Any]:
    """Two stacked panels over the covered days: failed jobs (hardware/software part dark)
    and node incidents; the report's night is outlined."""
    n = max(len(daily), 1)
    left, right, panel_h, gap, top_pad = 44, 8, 90, 34, 14
    step = (width - left - right) / n
    bw = max(min(step * 0.75, 28), 2)
    jobs_top = nice_max(max([d["failed_jobs"] for d in daily] + [0]))
    inc_top = nice_max(max([d["incidents"] for d in daily] + [0]))
    y0_jobs = top_pad + panel_h
    y0_inc = top_pad + panel_h + gap + panel_h
    bars = []
    label_every = max(1, math.ceil(n / 15))
    for i, d in enumerate(daily):
        x = left + i * step + (step - bw) / 2
        hj = panel_h * d["failed_jobs"] / jobs_top
        hi = panel_h * d["infra_failed_jobs"] / jobs_top
        hn = panel_h * d["incidents"] / inc_top
        bars.append(
            {
                "x": round(x, 1),
                "w": round(bw, 1),
                "day": d["day"],
                "is_night": d["day"] == day,
                "jobs_y": round(y0_jobs - hj, 1),
                "jobs_h": round(hj, 1),
                "infra_y": round(y0_jobs - hi, 1),
                "infra_h": round(hi, 1),
                "inc_y": round(y0_inc - hn, 1),
                "inc_h": round(hn, 1),
                "label": d["day"].strftime("%m-%d") if i % label_every == 0 or d["day"] == day else "",
                "failed_jobs": d["failed_jobs"],
                "infra_failed_jobs": d["infra_failed_jobs"],
                "incidents": d["incidents"],
                "gpu_hours_lost": d["gpu_hours_lost"],
            }
        )
    return {
        "width": width,
        "height": y0_inc + 28,
        "left": left,
        "right": width - right,
        "y0_jobs": y0_jobs,
        "y0_inc": y0_inc,
        "panel_h": panel_h,
        "top_pad": top_pad,
        "jobs_top": fmt_tick(jobs_top),
        "inc_top": fmt_tick(inc_top),
        "bars": bars,
        "jobs_title_y": top_pad - 3,
        "inc_title_y": y0_jobs + gap - 3,
    }


def heat_colour(n: int) -> str:
    if n <= 0:
        return HEAT_COLOURS[0]
    if n == 1:
        return HEAT_COLOURS[1]
    if n == 2:
        return HEAT_COLOURS[2]
    return HEAT_COLOURS[3] if n <= 4 else HEAT_COLOURS[4]


def heatmap(h: dict[str, Any], days: list[dt.date], night: dt.date) -> dict[str, Any]:
    """Racks (rows) x days (columns), coloured by node incidents that day."""
    cell = 14 if len(days) <= 40 else 9
    left, top = 70, 40
    cells = []
    for i, rack in enumerate(h["racks"]):
        for k, d in enumerate(days):
            c = h["cells"].get((rack, d))
            n = int(c["incidents"]) if c else 0
            cells.append(
                {
                    "x": left + k * cell,
                    "y": top + i * cell,
                    "fill": heat_colour(n),
                    "rack": rack,
                    "day": d,
                    "n": n,
                    "nodes": int(c["nodes"]) if c else 0,
                    "category": (c or {}).get("top_category"),
                }
            )
    # day labels stand vertically above the columns: one per column fits down to 10 px cells
    label_every = 1 if cell >= 10 else 2
    keep = {k for k in range(len(days)) if (len(days) - 1 - k) % label_every == 0}
    cols = [
        {"x": left + k * cell + cell * 0.75, "y": top - 4, "label": d.strftime("%m-%d"), "night": d == night}
        for k, d in enumerate(days)
        if k in keep
    ]
    night_x = next((left + k * cell for k, d in enumerate(days) if d == night), None)
    return {
        "cell": cell,
        "left": left,
        "top": top,
        "cells": cells,
        "cols": cols,
        "night_x": night_x,
        "rows": [{"y": top + i * cell + cell * 0.75, "label": r} for i, r in enumerate(h["racks"])],
        "width": left + max(len(days), 1) * cell + 6,
        "height": top + max(len(h["racks"]), 1) * cell + 4,
    }


def paired_bars(
    rows: list[dict[str, Any]], first: str, second: str, low: str, high: str, width: int = 520, bar: int = 9
) -> dict[str, Any]:
    """Two horizontal bars per row on one shared scale (the price paid and the effective price
    per useful GPU-hour, or 1 and the goodput), the second with its 95% whisker."""
    top = nice_max(max([r.get(k) or 0 for r in rows for k in (first, second, high)] + [0]))
    left, right, row_h = 110, 12, 2 * bar + 14
    span = width - left - right

    def x(v):
        return round(left + span * min(max(v or 0.0, 0.0), top) / top, 1)

    marks = []
    for i, r in enumerate(rows):
        y = 20 + i * row_h
        marks.append(
            {
                "label": r.get("provider") or "",
                "y1": y,
                "y2": y + bar + 2,
                "ytext": y + bar,
                "w1": round(x(r.get(first)) - left, 1),
                "w2": round(x(r.get(second)) - left, 1),
                "x_lo": x(r.get(low)),
                "x_hi": x(r.get(high)),
                "ymid": y + bar + 2 + bar / 2,
                "v1": r.get(first),
                "v2": r.get(second),
                "lo": r.get(low),
                "hi": r.get(high),
            }
        )
    return {
        "width": width,
        "height": 20 + len(rows) * row_h + 18,
        "left": left,
        "bar": bar,
        "marks": marks,
        "ticks": [{"x": x(t), "label": fmt_tick(t)} for t in ticks(top)],
        "axis_y": 20 + len(rows) * row_h + 2,
    }
