"""The fault process: Poisson faults per node (provider x cluster lottery), lemons, bad racks, bursts."""

from __future__ import annotations

import numpy as np
import polars as pl

from . import catalog
from .downtime import DAY, MIN
from .rng import stream

ROOT_CATEGORIES = (
    "gpu_bus_lost",
    "gpu_memory",
    "nvlink",
    "gpu_hardware",
    "driver_firmware",
    "network",
    "host",
    "storage",
    "thermal_power",
    "collective_timeout",
)
S = 1_000_000


def node_rates(fleet, scn) -> np.ndarray:
    """Independent fault rate of every node, per 1,000 node-days (lemon surplus not included)."""
    cl = fleet.clusters.join(fleet.providers, on=["provider", "provider_idx"])
    mult = fleet.nodes.join(
        cl.select("cluster_idx", "cluster_multiplier", "provider_multiplier"), on="cluster_idx", how="left"
    )
    return (scn.base_rate * mult["cluster_multiplier"] * mult["provider_multiplier"]).to_numpy()


def choose_lemons(fleet, scn, seed: int) -> pl.DataFrame:
    rng = stream(seed, "lemons")
    n = fleet.n_nodes
    k = min(n, max(1, int(round(scn.lemon_fraction * n))))
    who = np.sort(rng.choice(n, size=k, replace=False))
    comps = list(scn.lemon_components or catalog.LEMON_COMPONENTS)
    w = np.array([catalog.LEMON_COMPONENTS[c][0] for c in comps])
    comp = rng.choice(len(comps), size=k, p=w / w.sum())
    return pl.DataFrame(
        {
            "node_idx": who.astype(np.int64),
            "component": [comps[c] for c in comp],
            "multiplier": rng.uniform(*scn.lemon_multiplier, k),
            "gpu_index": rng.integers(0, 8, k),
        }
    )


def choose_bad_racks(fleet, scn, seed: int) -> pl.DataFrame:
    rng = stream(seed, "bad_racks")
    racks = (
        fleet.nodes.group_by("rack_idx")
        .agg(pl.len().alias("n"), pl.first("cluster_idx"))
        .filter(pl.col("n") >= 3)
        .sort("rack_idx")
    )
    if racks.height == 0:
        return pl.DataFrame(schema={"rack_idx": pl.Int64, "mode": pl.Utf8})
    k = min(racks.height, max(1, int(round(scn.bad_rack_fraction * racks.height))))
    who = np.sort(rng.choice(racks["rack_idx"].to_numpy(), size=k, replace=False))
    return pl.DataFrame({"rack_idx": who.astype(np.int64), "mode": ["link_flaps"] * k})


def outside(node: np.ndarray, t: np.ndarray, intervals: pl.DataFrame) -> np.ndarray:
    """Mask of (node, t) that fall in none of the node's ``[start, end)`` intervals (non-overlapping)."""
    if len(t) == 0 or intervals.height == 0:
        return np.ones(len(t), dtype=bool)
    ev = pl.DataFrame(
        {"node_idx": np.asarray(node, dtype=np.int64), "t": np.asarray(t, dtype=np.int64), "i": np.arange(len(t))}
    ).sort("node_idx", "t")
    iv = intervals.select(
        pl.col("node_idx").cast(pl.Int64), pl.col("start").alias("_s"), pl.col("end").alias("_e")
    ).sort("node_idx", "_s")
    hit = ev.join_asof(iv, left_on="t", right_on="_s", by="node_idx", strategy="backward", check_sortedness=False)
    inside = hit.filter(pl.col("_e").is_not_null() & (pl.col("t") < pl.col("_e")))["i"].to_numpy()
    keep = np.ones(len(t), dtype=bool)
    keep[inside] = False
    return keep


def _exposure(up_from: np.ndarray, end: int, maint: pl.DataFrame) -> np.ndarray:
    """Node-days each node can fail in: from ``up_from`` to the end, minus maintenance."""
    up = (end - up_from).astype(np.float64)
    if maint.height:
        m = maint.group_by("node_idx").agg((pl.col("end") - pl.col("start")).sum().alias("m"))
        up[m["node_idx"].to_numpy()] -= m["m"].to_numpy()
    return up / DAY


def sample_faults(
    fleet,
    scn,
    up_from: np.ndarray,
    end: int,
    maint: pl.DataFrame,
    lemons: pl.DataFrame,
    bad_racks: pl.DataFrame,
    seed: int,
) -> tuple[pl.DataFrame, dict]:
    """All infrastructure faults (independent, lemon, bad-rack flaps) plus the expectations behind them.
    ``up_from``: per node, when it can start failing (10 minutes after boot, or the window start)."""
    rng = stream(seed, "faults")
    n = fleet.n_nodes
    start = up_from
    rate = node_rates(fleet, scn)
    expo = _exposure(up_from, end, maint)
    models = fleet.nodes.join(fleet.clusters.select("cluster_idx", "gpu_model"), on="cluster_idx", how="left")[
        "gpu_model"
    ].to_list()

    parts = []
    # independent faults: Poisson over [start, end) thinned by maintenance == Poisson over up time
    lam = rate / 1000.0 * (end - start) / DAY
    cnt = rng.poisson(lam)
    node = np.repeat(np.arange(n), cnt)
    t = (start[node] + rng.random(len(node)) * (end - start[node])).astype(np.int64)
    parts.append(_with_kinds(node, t, models, rng, source="independent"))

    # lemon surplus: a single failing component, rate = multiplier x max(node rate, base rate)
    lemon_expected = np.zeros(n)
    if lemons.height:
        ln = lemons["node_idx"].to_numpy()
        lrate = lemons["multiplier"].to_numpy() * np.maximum(rate[ln], scn.base_rate)
        lemon_expected[ln] = lrate / 1000.0 * expo[ln]
        lcnt = rng.poisson(lrate / 1000.0 * (end - start[ln]) / DAY)
        if scn.lemon_min_faults:
            lcnt = np.maximum(lcnt, scn.lemon_min_faults)
            lemon_expected[ln] = _mean_at_least(lemon_expected[ln], scn.lemon_min_faults)
        rows = []
        for i, c in enumerate(lcnt):
            comp = lemons["component"][i]
            kinds = [catalog.BY_NAME[k] for k in catalog.LEMON_COMPONENTS[comp][1]]
            kinds = [_model_kind(k, models[ln[i]]) for k in kinds]
            kk = rng.integers(0, len(kinds), c)
            tt = (start[ln[i]] + rng.random(c) * (end - start[ln[i]])).astype(np.int64)
            rows.append(
                pl.DataFrame(
                    {
                        "node_idx": np.full(c, ln[i], np.int64),
                        "t": tt,
                        "kind": [kinds[j].name for j in kk],
                        "gpu_index": np.full(c, lemons["gpu_index"][i], np.int64),
                        "nic_index": np.full(c, lemons["gpu_index"][i], np.int64),
                        "sw_index": rng.integers(0, 4, c),
                        "source": ["lemon"] * c,
                    }
                )
            )
        parts.extend(rows)

    # bad racks: episodes of correlated link flaps on several nodes within minutes
    flap_expected = {}
    if bad_racks.height:
        for r in bad_racks["rack_idx"].to_list():
            rn = fleet.nodes.filter(pl.col("rack_idx") == r)["node_idx"].to_numpy()
            days = float(np.mean(expo[rn]))
            ne = rng.poisson(scn.flap_episodes_per_day * days)
            mean_nodes = (3 + min(6, len(rn))) / 2.0
            flap_expected[r] = scn.flap_episodes_per_day * days * mean_nodes
            for e in range(ne):
                tau = int(start[rn].max() + rng.random() * (end - start[rn].max()))
                m = int(rng.integers(3, min(6, len(rn)) + 1))
                who = np.sort(rng.choice(rn, size=m, replace=False))
                parts.append(
                    pl.DataFrame(
                        {
                            "node_idx": who.astype(np.int64),
                            "t": tau + rng.integers(0, 180 * S, m),
                            "kind": ["link_flap"] * m,
                            "gpu_index": np.full(m, -1, np.int64),
                            "nic_index": rng.integers(0, 8, m),
                            "sw_index": np.zeros(m, np.int64),
                            "source": [f"flap:{r}:{e}"] * m,
                        }
                    )
                )

    f = pl.concat(
        [
            p.cast(
                {
                    "node_idx": pl.Int64,
                    "t": pl.Int64,
                    "gpu_index": pl.Int64,
                    "nic_index": pl.Int64,
                    "sw_index": pl.Int64,
                    "kind": pl.Utf8,
                    "source": pl.Utf8,
                }
            )
            for p in parts
        ]
    )
    f = f.filter(pl.Series(outside(f["node_idx"].to_numpy(), f["t"].to_numpy(), maint)))
    f = _cover_categories(f.sort("t", "node_idx", "kind"), models, rng)
    expect = {"rate": rate, "exposure_days": expo, "lemon_expected": lemon_expected, "flap_expected": flap_expected}
    return _decorate(f, rng), expect


def _mean_at_least(mean: np.ndarray, floor: int) -> np.ndarray:
    """E[max(X, floor)] for X ~ Poisson(mean): the expected count once a floor is imposed."""
    from scipy import stats

    k = np.arange(floor)
    below = stats.poisson.pmf(k[:, None], mean[None, :])
    return mean + ((floor - k)[:, None] * below).sum(axis=0)


def _model_kind(kind: catalog.Kind, model: str) -> catalog.Kind:
    if catalog.applies(kind, model):
        return kind
    return next(k for k in catalog.infra_kinds(model) if k.category == kind.category and k.scope == kind.scope)


def _with_kinds(node: np.ndarray, t: np.ndarray, models: list[str], rng, source: str) -> pl.DataFrame:
    kinds = np.empty(len(node), dtype=object)
    for model in sorted(set(models)):
        ks = catalog.infra_kinds(model)
        w = np.array([k.weight for k in ks])
        sel = np.flatnonzero(np.asarray(models, dtype=object)[node] == model) if len(node) else []
        kinds[sel] = [ks[j].name for j in rng.choice(len(ks), size=len(sel), p=w / w.sum())]
    return pl.DataFrame(
        {
            "node_idx": node.astype(np.int64),
            "t": t,
            "kind": kinds.astype(str).tolist(),
            "gpu_index": rng.integers(0, 8, len(node)),
            "nic_index": rng.integers(0, 8, len(node)),
            "sw_index": rng.integers(0, 4, len(node)),
            "source": [source] * len(node),
        },
        schema_overrides={"kind": pl.Utf8},
    )


def _cover_categories(f: pl.DataFrame, models: list[str], rng) -> pl.DataFrame:
    """Small runs still show every root-cause category: relabel a few independent faults of the
    commonest category (the counts, times and places stay as sampled)."""
    cat = {k.name: k.category for k in catalog.KINDS}
    indep = f.with_row_index("i").filter(pl.col("source") == "independent")
    if indep.height < len(ROOT_CATEGORIES) + 5:
        return f
    have = {cat[k] for k in indep["kind"].to_list()}
    missing = [c for c in ROOT_CATEGORIES if c not in have]
    kinds = f["kind"].to_list()
    for c in missing:
        counts = {}
        for i in indep["i"].to_list():
            counts.setdefault(cat[kinds[i]], []).append(i)
        donor = max(sorted(counts), key=lambda x: len(counts[x]))
        i = counts[donor][int(rng.integers(len(counts[donor])))]
        model = models[f["node_idx"][i]]
        options = [k for k in catalog.infra_kinds(model) if k.category == c]
        kinds[i] = options[int(rng.integers(len(options)))].name
    return f.with_columns(kind=pl.Series(kinds))


def _decorate(f: pl.DataFrame, rng) -> pl.DataFrame:
    """Per-fault shape: drain time, burst size, flap repetitions, recovery delay."""
    n = f.height
    kinds = [catalog.BY_NAME[k] for k in f["kind"].to_list()]
    lo = np.array([k.down_min[0] for k in kinds], dtype=np.float64)
    hi = np.array([k.down_min[1] for k in kinds], dtype=np.float64)
    down = ((lo + rng.random(n) * (hi - lo)) * MIN).astype(np.int64)
    reps = np.ones(n, dtype=np.int64)
    period = np.zeros(n, dtype=np.int64)
    is95 = f["kind"].to_numpy() == "xid95"
    lemon = f["source"].to_numpy() == "lemon"
    burst = is95 & (rng.random(n) < np.where(lemon, 0.9, 0.4))
    size = np.clip(np.exp(rng.normal(np.log(900), 0.9, n)), 150, 8000).astype(np.int64)
    span = rng.uniform(5 * S, 150 * S, n)
    reps[burst] = size[burst]
    period[burst] = (span[burst] / size[burst]).astype(np.int64)
    flap = f["kind"].to_numpy() == "link_flap"
    reps[flap] = rng.integers(1, 4, flap.sum())
    period[flap] = rng.integers(40 * S, 120 * S, flap.sum())
    recover = rng.integers(20 * S, 300 * S, n)
    recover[flap] = rng.integers(3 * S, 30 * S, flap.sum())
    return f.with_columns(
        down_us=pl.Series(down),
        reps=pl.Series(reps),
        period_us=pl.Series(period),
        recover_us=pl.Series(recover),
        reboot=pl.Series([k.reboot for k in kinds], dtype=pl.Boolean),
        crash=pl.Series([k.crash for k in kinds], dtype=pl.Boolean),
        category=pl.Series([k.category for k in kinds], dtype=pl.Utf8),
    )


def settle(f: pl.DataFrame, boot0: np.ndarray, maint: pl.DataFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Walk each node's faults in time order: drop faults while the node is powered off, give each
    fault its reboot (or none, when one is already pending), and list every boot and log gap."""
    rng = stream(seed, "settle")
    f = f.sort("node_idx", "t", "kind")
    mwin = {}
    for r in maint.iter_rows(named=True):
        mwin.setdefault(r["node_idx"], []).append((r["shutdown_t"], r["boot_t"]))
    node, t, down = f["node_idx"].to_list(), f["t"].to_list(), f["down_us"].to_list()
    reboot, crash, reps, period = (
        f["reboot"].to_list(),
        f["crash"].to_list(),
        f["reps"].to_list(),
        f["period_us"].to_list(),
    )
    keep = [True] * f.height
    boot_t = [None] * f.height
    shut_t = [None] * f.height
    gaps: dict[int, list] = {}
    for k, v in mwin.items():
        gaps[k] = list(v)
    pending_free: dict[int, int] = {}
    for i in range(f.height):
        nd, ti = node[i], t[i]
        last = ti + (reps[i] - 1) * period[i] + 10 * S
        if any(a - 5 * MIN <= ti <= b + 5 * MIN or a - 5 * MIN <= last <= b for a, b in gaps.get(nd, [])):
            keep[i] = False
            continue
        free = ti + down[i]
        if (reboot[i] or crash[i]) and pending_free.get(nd, -1) < ti:
            b = free - int(rng.integers(3 * MIN, 8 * MIN))
            s = max(ti + S if crash[i] else b - int(rng.integers(60 * S, 120 * S)), last + S)
            if any(a <= b and s <= e for a, e in gaps.get(nd, [])):  # collides with a planned reboot
                if crash[i]:
                    keep[i] = False
                    continue
            else:
                boot_t[i], shut_t[i] = b, s
                gaps.setdefault(nd, []).append((s, b))
        elif crash[i]:  # already drained and waiting for its reboot
            keep[i] = False
            continue
        pending_free[nd] = max(pending_free.get(nd, -1), free)
    f = f.with_columns(boot_t=pl.Series(boot_t, dtype=pl.Int64), shutdown_t=pl.Series(shut_t, dtype=pl.Int64))
    f = f.filter(pl.Series(keep, dtype=pl.Boolean))  # typed: an empty list would be Null
    gap_rows = [(nd, a, b) for nd in sorted(gaps) for a, b in sorted(gaps[nd])]
    g = pl.DataFrame(gap_rows, schema={"node_idx": pl.Int64, "start": pl.Int64, "end": pl.Int64}, orient="row")
    pre = pl.DataFrame(
        {
            "node_idx": np.arange(len(boot0), dtype=np.int64),
            "start": np.full(len(boot0), 0, np.int64),
            "end": boot0.astype(np.int64),
        }
    )
    return f.sort("t", "node_idx", "kind"), pl.concat([pre, g]).sort("node_idx", "start")


def sample_benign(fleet, scn, up_from: np.ndarray, end: int, seed: int) -> pl.DataFrame:
    """Xid 63 row-remap events: benign, recorded in the truth, never kill a job."""
    rng = stream(seed, "benign")
    start = up_from
    cnt = rng.poisson(scn.benign_xid63_per_node_day * (end - start) / DAY)
    node = np.repeat(np.arange(fleet.n_nodes), cnt)
    t = (start[node] + rng.random(len(node)) * (end - start[node])).astype(np.int64)
    return pl.DataFrame(
        {
            "node_idx": node.astype(np.int64),
            "t": t,
            "kind": ["xid63"] * len(node),
            "gpu_index": rng.integers(0, 8, len(node)),
            "source": ["benign"] * len(node),
        }
    )
