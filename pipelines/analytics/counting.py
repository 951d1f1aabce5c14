"""What faultline counts, defined once for the analytics (the views of sql/views say the same
for every query, command and page; a test holds the two to each other).

- A **failed job** is a job that did not complete (one ``job_failures`` row); an
  **infrastructure failure** is a failed job whose root cause is in the hardware or software
  domain.
- An **incident** is a node incident of severity error or critical; info and warning
  incidents (a recorded row remap, a throttle notice) are shown but never counted.
- A **node failure** is what a failure rate counts: an incident not shared by its rack (those
  are the rack's) or a job interruption with no incident to show for it (``node_failures``).
"""

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
