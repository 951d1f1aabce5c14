"""Option helpers shared by the commands."""
from __future__ import annotations

import datetime as dt

import click


def parse_date(_ctx, _param, value):
    """Click callback: a YYYY-MM-DD date (None passes through)."""
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a YYYY-MM-DD date") from exc
