"""The scenario's prices: ``prices.csv`` of the landing folder and the price of every cluster-day."""

from __future__ import annotations

import datetime as dt

import polars as pl

from .fleet import GPU_LIST_PRICE


def price_rows(fleet, scn, dates: list[str]) -> pl.DataFrame:
    """One row per provider and GPU model it has (cluster ``*``), valid over the window; a
    ``price_change`` splits that provider's rows at its day."""
    models = fleet.clusters.select("provider_idx", "provider", "gpu_model").unique().sort("provider_idx", "gpu_model")
    rows = []
    for p_idx, provider, model in models.iter_rows():
        base = round(GPU_LIST_PRICE[model] * scn.price_factors[p_idx % len(scn.price_factors)], 4)
        change = scn.price_change
        if change and change[0] == p_idx and 0 < change[1] < len(dates):
            until = (dt.date.fromisoformat(dates[change[1]]) - dt.timedelta(days=1)).isoformat()
            rows.append((provider, "*", model, base, dates[0], until))
            rows.append((provider, "*", model, round(base * change[2], 4), dates[change[1]], ""))
        else:
            rows.append((provider, "*", model, base, dates[0], ""))
    cols = ["provider", "cluster", "gpu_model", "usd_per_gpu_hour", "valid_from", "valid_to"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def cluster_day_prices(fleet, scn, dates: list[str]) -> pl.DataFrame:
    """``provider, cluster, day`` (index into ``dates``) -> ``usd_per_gpu_hour``."""
    out = []
    for c in fleet.clusters.iter_rows(named=True):
        base = GPU_LIST_PRICE[c["gpu_model"]] * scn.price_factors[c["provider_idx"] % len(scn.price_factors)]
        base = round(base, 4)
        change = scn.price_change
        for d in range(len(dates)):
            price = base
            if change and change[0] == c["provider_idx"] and 0 < change[1] < len(dates) and d >= change[1]:
                price = round(base * change[2], 4)
            out.append((c["provider"], c["cluster"], d, price))
    return pl.DataFrame(out, schema=["provider", "cluster", "day", "usd_per_gpu_hour"], orient="row")
