"""Fault rates: generated counts agree with the truth rates within Poisson error; providers differ."""

from __future__ import annotations

import datetime as dt
import gzip
import math

import polars as pl
import pytest

from faultline.simulate import SCENARIOS, downtime, faults, simulate
from faultline.simulate.fleet import build_fleet


def within_poisson(observed: float, expected: float, sigmas: float = 4.0) -> bool:
    return abs(observed - expected) <= sigmas * math.sqrt(max(expected, 1.0)) + 1


def test_fault_process_matches_its_rates_on_a_large_fleet():
    scn = SCENARIOS["lottery"].with_overrides(nodes=4000, days=90)
    fleet = build_fleet(scn, 3)
    t0 = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
    end = t0 + scn.days * downtime.DAY
    boot0 = downtime.first_boots(fleet.n_nodes, t0, 3)
    maint = downtime.plan_maintenance(fleet.nodes, t0, scn.days, 3)
    lemons = faults.choose_lemons(fleet, scn, 3)
    f, expect = faults.sample_faults(
        fleet, scn, boot0 + 10 * downtime.MIN, end, maint, lemons, faults.choose_bad_racks(fleet, scn, 3), 3
    )
    exp_node = expect["rate"] / 1000 * expect["exposure_days"] + expect["lemon_expected"]
    per = (
        fleet.nodes.select("provider")
        .with_columns(exp=pl.Series(exp_node))
        .group_by("provider")
        .agg(pl.col("exp").sum())
    )
    got = (
        f.filter(pl.col("source").is_in(["independent", "lemon"]))
        .join(fleet.nodes, on="node_idx")
        .group_by("provider")
        .len()
    )
    both = per.join(got, on="provider", how="left").fill_null(0)
    assert both.height == scn.providers
    for prov, exp, obs in both.iter_rows():
        assert exp > 30, prov
        assert within_poisson(obs, exp), (prov, obs, exp)
    # lemons concentrate faults on one component
    lem = f.filter(pl.col("source") == "lemon")
    assert lem.height > 0 and lem.group_by("node_idx").agg(pl.col("kind").n_unique())["kind"].max() <= 3
    # bad racks: flap counts agree with their expectation too
    flaps = f.filter(pl.col("kind") == "link_flap").height
    assert within_poisson(flaps / 4.5, sum(expect["flap_expected"].values()) / 4.5)
    # faults never land in maintenance windows
    assert faults.outside(f["node_idx"].to_numpy(), f["t"].to_numpy(), maint).all()


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("rates") / "landing"
    scn = SCENARIOS["lottery"].with_overrides(lemon_fraction=0.04)  # enough lemons to weigh them too
    summary = simulate(root, scenario=scn, nodes=160, days=45, noise=0, seed=5)
    return root, summary


def test_truth_rates_match_observed_faults(long_run):
    root, _ = long_run
    rates = pl.read_parquet(root / "_truth" / "rates.parquet")
    ft = pl.read_parquet(root / "_truth" / "faults.parquet")
    prov = rates.filter(pl.col("level") == "provider")
    assert prov.height == 5
    infra = ft.filter(pl.col("origin") == "infra")
    indep = infra.filter(pl.col("source").is_in(["independent", "lemon"]))
    for r in prov.iter_rows(named=True):
        mine = indep.filter(pl.col("provider") == r["provider"])
        assert mine.height == r["faults"]
        assert within_poisson(mine.height, r["expected_faults"]), (r["provider"], mine.height, r["expected_faults"])
        assert 0.9 * 160 / 5 * 45 * 0.5 < r["node_days"] <= r["nodes"] * 45
        assert r["rate_per_1k"] == pytest.approx(r["expected_faults"] / r["node_days"] * 1000, rel=1e-3)
    # the two parts separately, fleet-wide: ordinary nodes, and the lemons' surplus
    fleet = rates.filter(pl.col("level") == "fleet").row(0, named=True)
    base_exp = fleet["base_rate_per_1k"] * fleet["node_days"] / 1000
    lemon_exp = fleet["expected_faults"] - base_exp
    assert lemon_exp > 20
    assert within_poisson(indep.filter(pl.col("source") == "independent").height, base_exp)
    assert within_poisson(indep.filter(pl.col("source") == "lemon").height, lemon_exp)
    assert within_poisson(
        infra.filter(pl.col("source") == "bad_rack").height / 4.5, fleet["expected_bad_rack_faults"] / 4.5
    )
    # the lottery: the worst provider's true rate is several times the best's, and it shows
    order = prov.sort("base_rate_per_1k")
    best, worst = order.row(0, named=True), order.row(-1, named=True)
    assert worst["base_rate_per_1k"] > 4 * best["base_rate_per_1k"]
    assert worst["observed_per_1k"] > best["observed_per_1k"]
    assert 2 <= fleet["base_rate_per_1k"] <= 12  # research-cluster range
    assert fleet["faults"] == prov["faults"].sum() == rates.filter(pl.col("level") == "cluster")["faults"].sum()


def test_truth_interruption_rate_is_per_calendar_node_day_without_idle_nccl_hangs(long_run):
    """TRUTH.md, "Which faults are interruptions": the rate ``faultline evaluate`` scores."""
    root, _ = long_run
    rates = pl.read_parquet(root / "_truth" / "rates.parquet")
    ft = pl.read_parquet(root / "_truth" / "faults.parquet").filter(
        (pl.col("origin") == "infra") & pl.col("source").is_in(["independent", "lemon"])
    )
    idle_hang = (pl.col("kind") == "nccl_hang") & pl.col("affected_job_id").is_null()
    for r in rates.iter_rows(named=True):
        mine = ft if r["level"] == "fleet" else ft.filter(pl.col("provider") == r["provider"])
        if r["level"] == "cluster":
            mine = mine.filter(pl.col("cluster") == r["cluster"])
        assert r["interruptions"] == mine.height - mine.filter(idle_hang).height
        assert r["calendar_node_days"] == r["nodes"] * 45
        assert r["interruption_rate_per_1k"] == pytest.approx(
            r["expected_interruptions"] / r["calendar_node_days"] * 1000, abs=1e-3
        )  # both rounded
        # only NCCL hangs on idle time leave the expectation: at most their whole share of it
        assert r["expected_faults"] * (1 - 7 / 410) - 1e-3 <= r["expected_interruptions"] <= r["expected_faults"]
    fleet = rates.filter(pl.col("level") == "fleet").row(0, named=True)
    assert (fleet["faults"], fleet["interruptions"]) == (63, 63)
    # resubmitted jobs (the simulator's users rerun what ended early) keep nodes busy: fewer idle hangs
    assert (fleet["expected_faults"], fleet["expected_interruptions"]) == (73.041, 72.902)
    assert fleet["interruption_rate_per_1k"] == 10.1253 and fleet["rate_per_1k"] == 10.2835


def test_fault_key_lines_in_kernel_logs_count_like_the_truth(long_run):
    """Count every injected fault's key line in the logs themselves, per provider."""
    root, _ = long_run
    ft = pl.read_parquet(root / "_truth" / "faults.parquet").filter(pl.col("logged"))
    want = ft.group_by("provider", "cluster", "day", "node").agg(pl.col("signature"))
    found: dict[str, int] = {}
    for r in want.iter_rows(named=True):
        d = root / r["provider"] / r["cluster"] / r["day"] / "kernel"
        p = next(d.glob(r["node"] + ".log*"))
        data = p.read_bytes()
        text = (gzip.decompress(data) if p.name.endswith(".gz") else data).decode()
        for s in set(r["signature"]):
            assert s in text
        found[r["provider"]] = found.get(r["provider"], 0) + len(r["signature"])
    assert found == dict(ft.group_by("provider").len().iter_rows())
