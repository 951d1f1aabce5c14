"""Kernel-log line prefixes, one per convention (docs/classify.md, "Prefixes and timestamps"), as
polars expressions. Rows need ``lt`` (the node's clock: true time + skew, µs), ``mono`` (µs since
the node booted), ``host`` and ``msg``."""

from __future__ import annotations

import polars as pl

S = 1_000_000

CONVENTIONS = {
    "syslog": "BSD syslog: `Nov 24 03:14:07 host kernel: MSG` (no year; day padded `Nov  4`)",
    "syslog_mono": "BSD syslog with the kernel's own stamp: `Nov 24 03:14:07 host kernel: [ 8812.334455] MSG`",
    "short_iso": "journalctl -o short-iso: `2026-11-24T03:14:07+0000 host kernel: MSG`",
    "dmesg_T": "dmesg -T: `[Tue Nov 24 03:14:07 2026] MSG`",
    "dmesg_raw": "raw dmesg: `[ 8812.334455] MSG` plus kernel/<node>.boot with the boot times",
    "rfc3339": "rsyslog RFC 3339: `2026-11-24T03:14:07.123456+00:00 host kernel: MSG`",
    "dmesg_iso": "dmesg --time-format iso: `2026-11-24T03:14:07,123456+00:00 MSG`",
}


def mono_expr() -> pl.Expr:
    """printk's ``[%5lu.%06lu]``."""
    return pl.concat_str(
        [
            pl.lit("["),
            (pl.col("mono") // S).cast(pl.Utf8).str.pad_start(5, " "),
            pl.lit("."),
            (pl.col("mono") % S).cast(pl.Utf8).str.zfill(6),
            pl.lit("]"),
        ]
    )


def kernel_line(convention: str) -> pl.Expr:
    ts = pl.col("lt").cast(pl.Datetime("us"))
    host_tag = [pl.lit(" "), pl.col("host"), pl.lit(" kernel: ")]
    if convention == "syslog":
        parts = [ts.dt.strftime("%b %e %H:%M:%S"), *host_tag, pl.col("msg")]
    elif convention == "syslog_mono":
        parts = [ts.dt.strftime("%b %e %H:%M:%S"), *host_tag, mono_expr(), pl.lit(" "), pl.col("msg")]
    elif convention == "short_iso":
        parts = [ts.dt.strftime("%Y-%m-%dT%H:%M:%S+0000"), *host_tag, pl.col("msg")]
    elif convention == "dmesg_T":
        parts = [ts.dt.strftime("[%a %b %e %H:%M:%S %Y] "), pl.col("msg")]
    elif convention == "dmesg_raw":
        parts = [mono_expr(), pl.lit(" "), pl.col("msg")]
    elif convention == "rfc3339":
        parts = [ts.dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00"), *host_tag, pl.col("msg")]
    elif convention == "dmesg_iso":
        parts = [ts.dt.strftime("%Y-%m-%dT%H:%M:%S,%6f+00:00 "), pl.col("msg")]
    else:
        raise ValueError(f"unknown kernel-log convention {convention!r}")
    return pl.concat_str(parts)


def needs_mono(convention: str) -> bool:
    return convention in ("syslog_mono", "dmesg_raw")
