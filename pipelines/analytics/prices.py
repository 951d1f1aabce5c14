"""``prices.csv``: what each provider charges per GPU-hour (docs/costs.md), read strictly, and
the price of every node-day. A bad file is one ``PricesError`` naming its line."""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os

import polars as pl

from ..lake import storage

COLUMNS = ("provider", "cluster", "gpu_model", "usd_per_gpu_hour", "valid_from", "valid_to")
ANY = "*"
FILE_NAME = "prices.csv"
ENV = "FAULTLINE_PRICES"
SCHEMA = {
    "provider": pl.String,
    "cluster": pl.String,
    "gpu_model": pl.String,
    "usd_per_gpu_hour": pl.Float64,
    "valid_from": pl.Date,
    "valid_to": pl.Date,
    "line_no": pl.Int64,
}


class PricesError(ValueError):
    """prices.csv cannot be used; the message names the file and the line."""


def default_location(landing: str | os.PathLike | None) -> str | None:
    """``$FAULTLINE_PRICES``, else ``<landing>/prices.csv`` (which may not exist)."""
    if os.environ.get(ENV):
        return os.environ[ENV]
    if landing is None:
        return None
    return str(storage.join(landing, FILE_NAME))


def _read_bytes(location: str | os.PathLike) -> bytes | None:
    path = storage.location(location)
    if not path.is_file():
        return None
    return path.read_bytes()


def load_prices(location: str | os.PathLike | None, *, required: bool = False) -> pl.DataFrame | None:
    """The price rows of ``location`` (``SCHEMA``; valid_from / valid_to null: open-ended), or
    None when there is no file there (an error instead when ``required``)."""
    if location is None:
        return None
    data = _read_bytes(location)
    if data is None:
        if required:
            raise PricesError(f"{location}: no such file")
        return None
    return parse_prices(data, str(location))


def _date(text: str, where: str, col: str) -> dt.date | None:
    if not text:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise PricesError(f"{where}: {col} {text!r} is not a date (YYYY-MM-DD)") from None


def parse_prices(data: bytes, name: str = FILE_NAME) -> pl.DataFrame:
    """Parse the CSV text (header required, the ``COLUMNS`` in any order, extra columns ignored)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PricesError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise PricesError(f"{name}, line 1: empty file; the header is {','.join(COLUMNS)}")
    header = [h.strip().lower() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise PricesError(f"{name}, line 1: missing columns {', '.join(missing)} (the header is {','.join(COLUMNS)})")
    idx = {c: header.index(c) for c in COLUMNS}
    rows = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        where = f"{name}, line {line}"
        if len(row) < len(header):
            raise PricesError(f"{where}: {len(row)} fields, the header has {len(header)}")
        cell = {c: row[i].strip() for c, i in idx.items()}
        for c in ("provider", "cluster", "gpu_model"):
            if not cell[c]:
                raise PricesError(f"{where}: {c} is empty (write * for every {c.replace('_', ' ')})")
        if cell["provider"] == ANY:
            raise PricesError(f"{where}: provider must be named (only cluster and gpu_model may be *)")
        try:
            price = float(cell["usd_per_gpu_hour"])
        except ValueError:
            raise PricesError(f"{where}: usd_per_gpu_hour {cell['usd_per_gpu_hour']!r} is not a number") from None
        if not math.isfinite(price) or price < 0:
            raise PricesError(f"{where}: usd_per_gpu_hour {cell['usd_per_gpu_hour']!r} is not a price >= 0")
        lo, hi = _date(cell["valid_from"], where, "valid_from"), _date(cell["valid_to"], where, "valid_to")
        if lo and hi and hi < lo:
            raise PricesError(f"{where}: valid_to {hi} is before valid_from {lo}")
        rows.append((cell["provider"], cell["cluster"], cell["gpu_model"], price, lo, hi, line))
    df = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    _check_overlaps(df, name)
    return df


def _check_overlaps(df: pl.DataFrame, name: str) -> None:
    """Two rows for the same provider, cluster and GPU model must not both cover a day."""
    far_lo, far_hi = dt.date(1, 1, 1), dt.date(9999, 12, 31)
    for _key, part in df.group_by("provider", "cluster", "gpu_model", maintain_order=True):
        spans = sorted(
            (r["valid_from"] or far_lo, r["valid_to"] or far_hi, r["line_no"]) for r in part.iter_rows(named=True)
        )
        for (_a0, a1, la), (b0, _b1, lb) in zip(spans, spans[1:]):
            if b0 <= a1:
                first, second = sorted((la, lb))
                raise PricesError(
                    f"{name}, lines {first} and {second}: both price {part['provider'][0]}/{part['cluster'][0]}/"
                    f"{part['gpu_model'][0]} on {b0}"
                )


def price_days(keys: pl.DataFrame, prices: pl.DataFrame | None) -> pl.DataFrame:
    """``keys`` (provider, cluster, gpu_model, date) with ``usd_per_gpu_hour`` (null: no row
    prices it): the most specific row valid that day wins (a named cluster over ``*``, then a
    named GPU model over ``*``)."""
    if prices is None or prices.is_empty():
        return keys.with_columns(usd_per_gpu_hour=pl.lit(None, pl.Float64))
    k = keys.select("provider", "cluster", "gpu_model", "date").unique()
    p = prices.rename({"cluster": "_pc", "gpu_model": "_pm"})
    m = (
        k.join(p, on="provider", how="inner")
        .filter(
            ((pl.col("_pc") == pl.col("cluster")) | (pl.col("_pc") == ANY))
            & ((pl.col("_pm") == pl.col("gpu_model")) | (pl.col("_pm") == ANY))
            & (pl.col("valid_from").is_null() | (pl.col("date") >= pl.col("valid_from")))
            & (pl.col("valid_to").is_null() | (pl.col("date") <= pl.col("valid_to")))
        )
        .with_columns(_spec=(pl.col("_pc") != ANY).cast(pl.Int32) * 2 + (pl.col("_pm") != ANY).cast(pl.Int32))
        .sort("_spec", descending=True)
        .group_by("provider", "cluster", "gpu_model", "date", maintain_order=True)
        .first()
        .select("provider", "cluster", "gpu_model", "date", "usd_per_gpu_hour")
    )
    return keys.join(m, on=["provider", "cluster", "gpu_model", "date"], how="left", nulls_equal=True)
