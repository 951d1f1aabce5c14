"""What faultline counts (failed job, infrastructure failure, incident, node failure), defined
once for the analytics as docs/analytics.md states; the views of sql/views say the same for
every query, command and page, and a test holds the two to each other."""

from __future__ import annotations

import polars as pl

SERIOUS = ("error", "critical")
INFRASTRUCTURE = ("hardware", "software")


def counted_incident() -> pl.Expr:
    """An incident that counts: severity error or critical."""
    return pl.col("severity").is_in(SERIOUS)


def infrastructure() -> pl.Expr:
    """A failed job's root cause is the infrastructure's: hardware or software domain."""
    return pl.col("domain").is_in(INFRASTRUCTURE)


def utc_day(col: str) -> pl.Expr:
    """The UTC day of a timestamp column."""
    return pl.col(col).dt.convert_time_zone("UTC").dt.date()
