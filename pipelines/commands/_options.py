"""Option helpers shared by the commands."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import click


class Location(click.ParamType):
    """A local path (a ``Path``, as ``click.Path`` gives it) or an object-storage URL such as
    ``s3://bucket/prefix`` (kept as a string: ``Path`` would fold its ``//``)."""

    name = "path|url"

    def convert(self, value, param, ctx):
        from ..lake.storage import is_url

        if isinstance(value, Path) or not is_url(os.fsdecode(value)):
            return Path(os.fsdecode(value))
        return os.fsdecode(value)


LOCATION = Location()


def parse_date(_ctx, _param, value):
    """Click callback: a YYYY-MM-DD date (None passes through)."""
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a YYYY-MM-DD date") from exc
