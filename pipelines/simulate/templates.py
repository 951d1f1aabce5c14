"""Message templates rendered over whole columns: ``"Xid (PCI:{gpu_pci}): 79"`` -> a polars expression.
A placeholder is a column of the frame, or a time token formatted from the line's own time ``t``
(int64 microseconds since the epoch, UTC)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import polars as pl

_PLACE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")

TIME_TOKENS = {
    "iso_s": "%Y-%m-%dT%H:%M:%S",  # Slurm and slurmstepd
    "pylog": "%Y-%m-%d %H:%M:%S,%3f",  # python logging
    "glog": "%m%d %H:%M:%S%.9f",  # glog / c10 logging after the level letter
    "glog6": "%m%d %H:%M:%S%.6f",
    "tr_time": "%Y-%m-%d_%H:%M:%S",  # torchrun ChildFailedError table
    "ctld": "%Y-%m-%dT%H:%M:%S%.3f",  # slurmctld
    "ymd_hms": "%Y-%m-%d %H:%M:%S",  # Megatron-LM and NeMo stamps
}


def _time_expr(token: str) -> pl.Expr:
    return pl.col("t").cast(pl.Datetime("us")).dt.strftime(TIME_TOKENS[token])


@lru_cache(maxsize=4096)
def _parts(template: str) -> tuple[tuple[bool, str], ...]:
    out, pos = [], 0
    for m in _PLACE.finditer(template):
        if m.start() > pos:
            out.append((False, template[pos : m.start()]))
        out.append((True, m.group(1)))
        pos = m.end()
    if pos < len(template):
        out.append((False, template[pos:]))
    return tuple(out)


def render(template: str) -> pl.Expr:
    """Polars expression producing ``template`` with every placeholder filled from its column."""
    exprs = []
    for is_field, text in _parts(template):
        if not is_field:
            exprs.append(pl.lit(text))
        elif text in TIME_TOKENS:
            exprs.append(_time_expr(text))
        else:
            exprs.append(pl.col(text).cast(pl.Utf8))
    if not exprs:
        return pl.lit("")
    return pl.concat_str(exprs) if len(exprs) > 1 else exprs[0]


Offset = int | str


def expand(
    frame: pl.DataFrame, lines: Sequence[tuple[Offset, str]], keys: Sequence[str], seq_base: int = 0
) -> pl.DataFrame:
    """One output row per (input row, template line): ``keys + [t, seq, msg]``. ``frame`` needs ``t``
    (µs) and ``eseq`` (unique per event in its source); an offset is µs or a column of µs. ``seq``
    orders lines that share a time: source, then event, then line inside the event."""
    if frame.height == 0 or not lines:
        return pl.DataFrame(
            schema={**{k: frame.schema[k] for k in keys}, "t": pl.Int64, "seq": pl.Int64, "msg": pl.Utf8}
        )
    out = []
    for i, (off, tpl) in enumerate(lines):
        t = pl.col("t") + (pl.col(off) if isinstance(off, str) else pl.lit(int(off)))
        out.append(
            frame.with_columns(t=t.cast(pl.Int64)).select(
                *keys,
                "t",
                (pl.lit(seq_base) + pl.col("eseq") * 1024 + i).cast(pl.Int64).alias("seq"),
                render(tpl).alias("msg"),
            )
        )
    return pl.concat(out)


def empty_rows(keys: dict) -> pl.DataFrame:
    return pl.DataFrame(schema={**keys, "t": pl.Int64, "seq": pl.Int64, "msg": pl.Utf8})
