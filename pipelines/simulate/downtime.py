"""When nodes are up: first boot, planned maintenance windows, clock skew."""

from __future__ import annotations

import numpy as np
import polars as pl

from .rng import stream

MIN = 60_000_000
HOUR = 60 * MIN
DAY = 24 * HOUR


def first_boots(n_nodes: int, t0: int, seed: int) -> np.ndarray:
    """The fleet is brought up at the start of the window, staggered over 20 minutes."""
    return t0 + stream(seed, "boot0").integers(0, 20 * MIN, n_nodes)


def plan_maintenance(nodes: pl.DataFrame, t0: int, days: int, seed: int) -> pl.DataFrame:
    """About one window per cluster per week over a block of racks; at least one in every run."""
    rng = stream(seed, "maintenance")
    end = t0 + days * DAY
    clusters = nodes["cluster_idx"].unique().sort().to_list()
    counts = rng.poisson(days / 7.0, len(clusters))
    if counts.sum() == 0:
        counts[rng.integers(len(clusters))] = 1
    rows = []
    for ci, k in zip(clusters, counts):
        cn = nodes.filter(pl.col("cluster_idx") == ci)
        racks = cn["rack_idx"].unique().sort().to_numpy()
        for _ in range(int(k)):
            lo = t0 + (DAY if days > 1 else 6 * HOUR)
            start = int(rng.integers(lo, max(lo + 1, end - 10 * HOUR)))
            length = int(rng.integers(2 * HOUR, 6 * HOUR))
            take = max(1, int(round(len(racks) * rng.uniform(0.25, 1.0))))
            first = int(rng.integers(0, len(racks) - take + 1))
            sel = cn.filter(pl.col("rack_idx").is_in(racks[first : first + take].tolist()))
            n = sel.height
            shutdown = start + rng.integers(0, 10 * MIN, n)
            boot = start + length - rng.integers(5 * MIN, 25 * MIN, n)
            rows.append(
                pl.DataFrame(
                    {
                        "node_idx": sel["node_idx"],
                        "start": np.full(n, start, np.int64),
                        "end": np.full(n, start + length, np.int64),
                        "shutdown_t": shutdown,
                        "boot_t": boot,
                        "window": np.full(n, len(rows), np.int64),
                    }
                )
            )
    if not rows:
        return pl.DataFrame(
            schema={
                "node_idx": pl.Int64,
                "start": pl.Int64,
                "end": pl.Int64,
                "shutdown_t": pl.Int64,
                "boot_t": pl.Int64,
                "window": pl.Int64,
            }
        )
    return pl.concat(rows).sort("node_idx", "start")


def choose_skew(n_nodes: int, fraction: float, seed: int) -> np.ndarray:
    """Per-node clock offset in µs (kernel timestamps = true time + skew); minutes to hours on a few."""
    rng = stream(seed, "skew")
    skew = np.zeros(n_nodes, dtype=np.int64)
    k = max(1, int(round(fraction * n_nodes)))
    who = rng.choice(n_nodes, size=min(k, n_nodes), replace=False)
    mag = np.exp(rng.uniform(np.log(120.0), np.log(3 * 3600.0), len(who)))
    skew[who] = (np.sign(rng.uniform(-1, 1, len(who))) * mag * 1e6).astype(np.int64)
    return skew
