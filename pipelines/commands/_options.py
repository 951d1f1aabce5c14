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


def parse_boots(_ctx, _param, values):
    """Click callback: ``--boot`` ISO-8601 times (UTC where no zone is given)."""
    out = []
    for b in values:
        try:
            t = dt.datetime.fromisoformat(b.replace("Z", "+00:00"))
        except ValueError as exc:
            raise click.BadParameter(f"{b!r} is not an ISO-8601 time") from exc
        out.append(t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc))
    return out


def location_option(name: str, default: str, help: str):
    """``--landing`` / ``--warehouse``: a folder or URL, from env ``FAULTLINE_<NAME>`` by default."""
    env = f"FAULTLINE_{name.upper()}"
    return click.option(
        f"--{name}", type=LOCATION, envvar=env, default=default, show_default=True, help=f"{help} Env: {env}."
    )


mkdir_option = click.option(
    "--mkdir", is_flag=True, help="Create the folder of --out when it does not exist (else that is an error)."
)


def check_out(out, mkdir: bool) -> None:
    """A local ``--out`` file's folder must exist, or be made with ``--mkdir``: a mistyped path
    is an error, never a new folder tree. URLs pass (object stores have no folders)."""
    from ..lake.storage import is_url

    if out is None or is_url(out):
        return
    folder = Path(out).parent
    if folder.is_dir():
        return
    if folder.exists():
        raise click.BadParameter(f"{folder} is not a folder", param_hint="--out")
    if not mkdir:
        raise click.BadParameter(f"the folder {folder} does not exist (create it, or pass --mkdir)", param_hint="--out")
    folder.mkdir(parents=True)
