"""Training progress and checkpoint markers of job output (the ``marker`` rules of
models/rules/progress.yaml): what each line says (save, load, progress), the step, path and
throughput it states, and when it was printed. Vectorized over whole frames of lines."""

from __future__ import annotations

import polars as pl

from .engine import first_rule
from .ruleset import MARKER_GROUPS, RuleSet

#: one row per marker line: what the marker pass adds to the line's number and text
MARKER_COLUMNS = {
    "marker": pl.String,
    "marker_rule": pl.String,
    "step": pl.Int64,
    "path": pl.String,
    "tokens_per_s": pl.Float64,
    "samples_per_s": pl.Float64,
    "host": pl.String,
    "pid": pl.Int64,
    "rank": pl.Int64,
    "nranks": pl.Int64,
    "cuda_dev": pl.Int64,
}
# a wall-clock stamp anywhere in the message (stacks print their own: NeMo, torchtitan,
# DeepSpeed, HF Trainer), read as UTC like the prefix stamps
_ISO_IN_MSG = r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)"
_US_IN_MSG = r"\b(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d)\b"


def marker_fields(msgs: pl.Series, rs: RuleSet) -> pl.DataFrame:
    """``MARKER_COLUMNS`` for each message (all null where no marker rule matches): the first
    matching marker rule decides, each rule tried only on messages holding its keywords."""
    ms = rs.markers
    n = len(msgs)
    out = pl.DataFrame({"_row": pl.int_range(n, dtype=pl.Int64, eager=True)})
    if not ms.rules or n == 0:
        return out.select([pl.lit(None, t).alias(c) for c, t in MARKER_COLUMNS.items()])
    msgs = msgs.cast(pl.String).fill_null("")
    idx = first_rule(msgs, ms)
    parts = []
    for (i,), part in (
        pl.DataFrame({"_row": out["_row"], "_idx": idx, "m": msgs})
        .drop_nulls("_idx")
        .partition_by("_idx", as_dict=True)
        .items()
    ):
        rule = ms.rules[i]
        cols = {g: pl.lit(None, pl.String) for g in MARKER_GROUPS}
        if rule.marker_groups:
            ext = part["m"].str.extract_groups(rule.pattern).struct.unnest()
            cols.update({g: pl.Series(g, ext[g]) for g in rule.marker_groups})
        parts.append(
            part.select(
                "_row",
                marker=pl.lit(rule.marker),
                marker_rule=pl.lit(rule.id),
                **{g: (v if isinstance(v, pl.Expr) else pl.lit(v)) for g, v in cols.items()},
            )
        )
    schema = {"_row": pl.Int64, **{c: pl.String for c in ("marker", "marker_rule", *MARKER_GROUPS)}}
    hits = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=schema)
    number = lambda c: pl.col(c).str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)  # noqa: E731
    hits = hits.select(
        "_row",
        pl.col("marker").cast(pl.String),
        pl.col("marker_rule").cast(pl.String),
        step=pl.col("step").cast(pl.Int64, strict=False),
        path=pl.col("path").cast(pl.String),
        tokens_per_s=number("tokens_per_s"),
        samples_per_s=number("samples_per_s"),
        host=pl.col("host").cast(pl.String),
        **{c: pl.col(c).cast(pl.Int64, strict=False) for c in ("pid", "rank", "nranks", "cuda_dev")},
    )
    return out.join(hits, on="_row", how="left", maintain_order="left").drop("_row")


def stamp_in_message(msg: pl.Expr) -> pl.Expr:
    """The first wall-clock stamp inside a message (ISO date, or US mm/dd/yyyy), as UTC."""
    iso = (
        msg.str.extract(_ISO_IN_MSG, 1)
        .str.replace(",", ".", literal=True)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us", time_zone="UTC")
    )
    us = msg.str.extract(_US_IN_MSG, 1).str.to_datetime(
        "%m/%d/%Y %H:%M:%S", strict=False, time_unit="us", time_zone="UTC"
    )
    return pl.coalesce(iso, us)
