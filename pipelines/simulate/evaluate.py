"""Score a warehouse against the simulator's ``_truth/`` (``faultline evaluate``)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
from sklearn.metrics import f1_score

from ..lake import files as lake
from .truth import MANIFESTED_MIN_FAULTS, lemon_fault_counts

HARDWARE = ("gpu_bus_lost", "gpu_memory", "nvlink", "gpu_hardware", "network", "host", "storage", "thermal_power")
FLOORS = {
    "root_cause_macro_f1": 0.90,
    "unknown_share": 0.05,
    "culprit_top1_hw_net": 0.90,
    "lemon_precision": 0.85,
    "lemon_recall": 0.80,
    "bad_racks_found": 1.0,
    "provider_rates_covered": 1.0,
    "lost_gpu_hours_within_10pct": 1.0,
    "goodput_covered": 1.0,
    "cost_order_agrees": 1.0,
}
#: figures a truth folder or warehouse from before the cost analytics cannot have (scored when present)
COST_FIGURES = ("lost_gpu_hours_within_10pct", "goodput_covered", "cost_order_agrees")


def _truth(truth: str | os.PathLike, name: str) -> pl.DataFrame:
    return pl.read_parquet(Path(truth) / f"{name}.parquet")


def _keys(df: pl.DataFrame, what: str) -> set[str]:
    return set(df.select(pl.concat_str("provider", "cluster", what, separator="/")).to_series())


def _true_lemons(truth_dir: str | os.PathLike) -> tuple[set[str], set[str]]:
    """Every injected lemon, and those that manifested (from the truth's ``manifested`` column;
    a truth folder written before it existed gets it from ``faults.parquet``)."""
    lem = _truth(truth_dir, "lemons")
    if "manifested" not in lem.columns:
        counts = lemon_fault_counts(_truth(truth_dir, "faults"))
        lem = lem.join(counts.select("node", "n_logged_faults"), on="node", how="left").with_columns(
            manifested=pl.col("n_logged_faults").fill_null(0) >= MANIFESTED_MIN_FAULTS
        )
    return _keys(lem, "node"), _keys(lem.filter(pl.col("manifested")), "node")


def provider_rates(truth_rates: pl.DataFrame, scoreboard: pl.DataFrame) -> pl.DataFrame:
    """Each provider's true rate against the measured rate's interval: ``interruption_rate_per_1k``
    (TRUTH.md, "Which faults are interruptions"); the generation rate ``rate_per_1k`` is compared
    too (``covered_up_time_rate``), and scored where an older truth folder lacks the first."""
    t = truth_rates.filter(pl.col("level") == "provider")
    scored = "interruption_rate_per_1k" if "interruption_rate_per_1k" in t.columns else "rate_per_1k"
    sb = scoreboard.filter(pl.col("level") == "provider").select("provider", "rate_per_1k", "ci_low", "ci_high")

    def inside(col: str) -> pl.Expr:
        return ((pl.col(col) >= pl.col("ci_low")) & (pl.col(col) <= pl.col("ci_high"))).fill_null(False)

    return (
        t.select("provider", true_rate=pl.col(scored), up_time_rate=pl.col("rate_per_1k"))
        .join(sb, on="provider", how="left")
        .with_columns(covered=inside("true_rate"), covered_up_time_rate=inside("up_time_rate"))
    )


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def provider_costs(truth_goodput: pl.DataFrame, costs: pl.DataFrame) -> pl.DataFrame:
    """Per provider: the true lost GPU-hours (every cause, and infrastructure) against the
    measured, and the true goodput against the measured interval (TRUTH.md, "Goodput and cost")."""
    t = truth_goodput.filter(pl.col("level") == "provider").select(
        "provider",
        true_lost=pl.col("lost_gpu_hours"),
        true_lost_infra=pl.col("lost_gpu_hours_infra"),
        true_down=pl.col("down_gpu_hours"),
        true_goodput=pl.col("goodput"),
        true_effective=pl.col("effective_usd_per_useful_gpu_hour"),
    )
    o = costs.filter(pl.col("level") == "provider").select(
        "provider",
        lost=pl.col("lost_gpu_hours_infra") + pl.col("lost_gpu_hours_user") + pl.col("lost_gpu_hours_other"),
        lost_infra=pl.col("lost_gpu_hours_infra"),
        down=pl.col("down_gpu_hours"),
        goodput="goodput",
        goodput_low="goodput_low",
        goodput_high="goodput_high",
        effective="effective_usd_per_useful_gpu_hour",
    )
    err = lambda a, b: (pl.col(a) / pl.col(b) - 1).round(4)  # noqa: E731
    return t.join(o, on="provider", how="left").with_columns(
        lost_error=err("lost", "true_lost"),
        lost_infra_error=err("lost_infra", "true_lost_infra"),
        goodput_covered=(
            (pl.col("true_goodput") >= pl.col("goodput_low")) & (pl.col("true_goodput") <= pl.col("goodput_high"))
        ).fill_null(False),
    )


def cost_order(truth_goodput: pl.DataFrame, comparison: pl.DataFrame) -> pl.DataFrame:
    """Provider pairs the comparison calls distinguishable, and whether the true effective prices
    (or goodput, without prices) are in the same order."""
    col = {"effective_usd_per_useful_gpu_hour": "effective_usd_per_useful_gpu_hour", "goodput": "goodput"}
    truth = {
        m: dict(truth_goodput.filter(pl.col("level") == "provider").select("provider", c).iter_rows())
        for m, c in col.items()
    }
    rows = []
    for r in comparison.filter((pl.col("level") == "provider") & pl.col("distinguishable")).iter_rows(named=True):
        ta, tb = truth[r["measure"]].get(r["a"]), truth[r["measure"]].get(r["b"])
        agrees = ta is not None and tb is not None and (ta - tb) * r["difference"] > 0
        rows.append(
            {"a": r["a"], "b": r["b"], "measure": r["measure"], "difference": r["difference"], "agrees": agrees}
        )
    schema = {"a": pl.String, "b": pl.String, "measure": pl.String, "difference": pl.Float64, "agrees": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def _share(flags: pl.Series) -> float:
    return round(float(flags.mean()), 4) if flags.len() else float("nan")


def evaluate(truth_dir: str | os.PathLike, warehouse: str | os.PathLike) -> dict:
    root = lake.analytics_root(warehouse)
    ours = {
        n: pl.read_parquet(root / f"{n}.parquet")
        for n in ("job_failures", "lemon_nodes", "rack_hotspots", "provider_scoreboard")
    }
    costs = _costs(truth_dir, root)
    tj = _truth(truth_dir, "jobs").filter(pl.col("root_cause").is_not_null())
    j = (
        tj.select(
            "provider",
            "cluster",
            "job_id",
            pl.col("root_cause").alias("true_cause"),
            pl.col("culprit_node").alias("true_node"),
        )
        .join(
            ours["job_failures"].select("provider", "cluster", "job_id", "root_cause", "culprit_node"),
            on=["provider", "cluster", "job_id"],
            how="left",
        )
        .with_columns(pl.col("root_cause").fill_null("missing"))
    )
    labels = sorted(set(j["true_cause"].to_list()))
    f1 = (
        float(
            f1_score(
                j["true_cause"].to_list(), j["root_cause"].to_list(), labels=labels, average="macro", zero_division=0
            )
        )
        if j.height
        else float("nan")
    )
    per_class = {
        lab: float(v)
        for lab, v in zip(
            labels,
            f1_score(
                j["true_cause"].to_list(), j["root_cause"].to_list(), labels=labels, average=None, zero_division=0
            ),
        )
    }
    hw = j.filter(pl.col("true_cause").is_in(HARDWARE) & pl.col("true_node").is_not_null())
    culprit = float((hw["culprit_node"] == hw["true_node"]).fill_null(False).mean()) if hw.height else float("nan")

    injected, manifested = _true_lemons(truth_dir)
    ol = _keys(ours["lemon_nodes"], "node")
    # a flag on any injected lemon is right; recall is owed only on the lemons that showed
    # themselves in the logs (TRUTH.md, "Which lemons count"), and is printed over all too
    # a share of nothing is undefined (None, printed n/a), never a pass or a miss: precision
    # with no lemon flagged, recall with no lemon to find
    precision = len(injected & ol) / len(ol) if ol else None
    recall = len(manifested & ol) / len(manifested) if manifested else None
    recall_all = len(injected & ol) / len(injected) if injected else None

    tr = _keys(_truth(truth_dir, "bad_racks"), "rack")
    orr = _keys(ours["rack_hotspots"], "rack")
    racks = len(tr & orr) / len(tr) if tr else None

    pr = provider_rates(_truth(truth_dir, "rates"), ours["provider_scoreboard"])
    unknown = float((j["root_cause"] == "unknown").mean()) if j.height else 0.0
    figures = {
        "failed_jobs": j.height,
        "root_cause_macro_f1": round(f1, 4),
        "unknown_share": round(unknown, 4),
        "culprit_top1_hw_net": round(culprit, 4),
        "hw_net_jobs": hw.height,
        "lemon_precision": _round(precision),
        "lemon_recall": _round(recall),
        "lemon_recall_all_injected": _round(recall_all),
        "lemons_manifested": len(manifested),
        "lemons_injected": len(injected),
        "lemons_found": len(ol),
        "bad_racks_found": _round(racks),
        "bad_racks_true": len(tr),
        "provider_rates_covered": _share(pr["covered"]),
        "provider_rates_covered_up_time_rate": _share(pr["covered_up_time_rate"]),
        **costs["figures"],
    }
    passed = {
        k: None if figures[k] is None else (figures[k] <= v if k == "unknown_share" else figures[k] >= v)
        for k, v in FLOORS.items()
        if k in figures
    }
    confusion = j.group_by("true_cause", "root_cause").len().sort("true_cause", "len", descending=[False, True])
    return {
        "figures": figures,
        "passed": passed,
        "per_class_f1": per_class,
        "provider_rates": pr,
        "confusion": confusion,
        "provider_costs": costs["providers"],
        "cost_order": costs["order"],
    }


def _costs(truth_dir: str | os.PathLike, root) -> dict:
    """The cost figures, or None each where the truth (goodput.parquet) or the warehouse
    (provider_costs) predates them."""
    tg_path, oc_path = Path(truth_dir) / "goodput.parquet", root / "provider_costs.parquet"
    cmp_path = root / "provider_cost_comparison.parquet"
    if not (tg_path.exists() and oc_path.exists() and cmp_path.exists()):
        return {"figures": dict.fromkeys((*COST_FIGURES, "lost_gpu_hours_max_error")), "providers": None, "order": None}
    tg = pl.read_parquet(tg_path)
    pc = provider_costs(tg, pl.read_parquet(oc_path))
    order = cost_order(tg, pl.read_parquet(cmp_path))
    within = (pc["lost_error"].abs() <= 0.10).fill_null(False)
    return {
        "figures": {
            "lost_gpu_hours_within_10pct": _share(within),
            "lost_gpu_hours_max_error": round(float(pc["lost_error"].abs().max()), 4) if pc.height else None,
            "lost_gpu_hours_infra_max_error": round(float(pc["lost_infra_error"].abs().max()), 4)
            if pc.height and pc["lost_infra_error"].is_not_null().any()
            else None,
            "goodput_covered": _share(pc["goodput_covered"]),
            "cost_order_agrees": _share(order["agrees"]) if order.height else 1.0,
            "cost_pairs_distinguishable": order.height,
        },
        "providers": pc,
        "order": order,
    }
