"""Provider rates: what counts as a failure of a node (serious incidents plus job interruptions
that left none), the truth's interruption rate, and how evaluation scores one against the other."""

import datetime as dt

import polars as pl
import pytest

from faultline.analytics.rates import (
    group_health,
    job_interruptions,
    node_health,
    provider_comparison,
    scoreboard,
)
from faultline.simulate import catalog
from faultline.simulate.downtime import DAY
from faultline.simulate.evaluate import provider_rates
from faultline.simulate.truth import busy_days, idle_hang_share

UTC = dt.timezone.utc


def t(day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def incidents() -> pl.DataFrame:
    rows = [  # node, severity, category, first_ts, rack incident
        ("n1", "critical", "gpu_bus_lost", t(10, 10), None),  # kills job A
        ("n1", "error", "gpu_memory", t(2, 3), None),  # days before job G: explains nothing of it
        ("n2", "warning", "thermal_power", t(12, 5), None),  # throttling: not serious
        ("n3", "error", "network", t(14, 8), "acme/c1/r1/x"),  # a bad rack's flap: the rack's, kills job C
    ]
    return pl.DataFrame(
        rows,
        schema={
            "node": pl.String,
            "severity": pl.String,
            "category": pl.String,
            "first_ts": pl.Datetime("us", "UTC"),
            "rack_incident_id": pl.String,
        },
        orient="row",
    ).with_columns(provider=pl.lit("acme"), cluster=pl.lit("c1"))


def failures() -> pl.DataFrame:
    rows = [  # job, culprit, root cause, domain, started, ended
        ("A", "n1", "gpu_bus_lost", "hardware", t(10, 8), t(10, 10, 5)),  # its serious incident counts already
        ("B", "n2", "thermal_power", "hardware", t(12, 1), t(12, 5, 30)),  # throttling killed it: counts
        ("C", "n3", "network", "hardware", t(14, 7), t(14, 8, 10)),  # the rack's incident: not the node's
        ("D", "n2", "collective_timeout", "symptom", t(20, 1), t(20, 2)),  # NCCL hang localized to n2: counts
        ("E", None, "collective_timeout", "symptom", t(21, 1), t(21, 2)),  # hang nobody could localize
        ("F", "n1", "user_app", "user", t(22, 1), t(22, 2)),  # the user's bug
        ("G", "n1", "host", "hardware", t(5, 1), t(5, 3)),  # hung task, nothing serious near: counts
        ("H", "n3", "scheduler", "symptom", t(25, 1), t(25, 2)),  # a timeout
    ]
    return pl.DataFrame(
        rows,
        schema={
            "job_id": pl.String,
            "culprit_node": pl.String,
            "root_cause": pl.String,
            "domain": pl.String,
            "started": pl.Datetime("us", "UTC"),
            "ended": pl.Datetime("us", "UTC"),
        },
        orient="row",
    ).with_columns(provider=pl.lit("acme"), cluster=pl.lit("c1"), gpu_hours_lost=pl.lit(16.0))


def exposure() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "provider": ["acme"] * 3,
            "cluster": ["c1"] * 3,
            "rack": ["r1"] * 3,
            "node": ["n1", "n2", "n3"],
            "node_days": [30.0, 30.0, 30.0],
            "gpus": [8, 8, 8],
        }
    )


def test_job_interruptions_are_the_failed_jobs_no_serious_incident_explains():
    got = job_interruptions(incidents(), failures()).sort("job_id")
    assert got["job_id"].to_list() == ["B", "D", "G"]
    assert got["node"].to_list() == ["n2", "n2", "n1"]


def test_node_rates_count_serious_incidents_plus_interruptions():
    nodes = node_health(exposure(), incidents(), failures())
    by = {r["node"]: r for r in nodes.iter_rows(named=True)}
    assert [(by[n]["incidents"], by[n]["interruptions"], by[n]["failures"]) for n in ("n1", "n2", "n3")] == [
        (2, 1, 3),
        (0, 2, 2),
        (0, 0, 0),
    ]
    # the rate and its exact 95% interval are on failures: 2 in 30 node-days for n2
    assert by["n2"]["rate_per_1k"] == pytest.approx(2 / 30 * 1000)
    assert by["n2"]["ci_low"] == pytest.approx(8.07364, rel=1e-5)
    assert by["n2"]["ci_high"] == pytest.approx(240.82292, rel=1e-5)
    assert by["n3"]["ci_low"] == 0.0 and by["n3"]["ci_high"] == pytest.approx(122.96265, rel=1e-5)
    # failed jobs a node caused still count hardware/software domains only (C is n3's: network)
    assert [by[n]["failed_jobs"] for n in ("n1", "n2", "n3")] == [2, 1, 1]

    sb = scoreboard(nodes, failures())
    prov = sb.filter(pl.col("level") == "provider").row(0, named=True)
    assert (prov["incidents"], prov["interruptions"], prov["failures"]) == (2, 3, 5)
    assert prov["rate_per_1k"] == pytest.approx(5 / 90 * 1000)
    racks = group_health(nodes, ["provider", "cluster", "rack"]).row(0, named=True)
    assert racks["failures"] == 5 and racks["ci_high"] == pytest.approx(
        sb.filter(pl.col("level") == "provider")["ci_high"][0]
    )


def test_provider_comparison_compares_failures():
    sb = pl.DataFrame(
        {
            "level": ["provider", "provider"],
            "provider": ["a", "b"],
            "cluster": [None, None],
            "incidents": [0, 0],
            "failures": [40, 10],
            "node_days": [1000.0, 1000.0],
        }
    )
    row = provider_comparison(sb).row(0, named=True)
    assert row["ratio"] == pytest.approx(4.0)
    assert row["rate_a_per_1k"] == pytest.approx(40.0) and row["rate_b_per_1k"] == pytest.approx(10.0)
    assert row["distinguishable"]


def test_idle_hang_share_is_the_nccl_hang_weight_of_the_model_mix():
    for model in ("H100", "A100", "H200", "B200"):
        ks = catalog.infra_kinds(model)
        assert sum(k.weight for k in ks) == 410
    assert idle_hang_share(["H100", "B200"]).tolist() == pytest.approx([7 / 410, 7 / 410])


def test_busy_days_clip_jobs_to_the_window():
    t0 = int(dt.datetime(2026, 11, 1, tzinfo=UTC).timestamp()) * 1_000_000
    end = t0 + 30 * DAY
    jt = pl.DataFrame(
        {
            "nodes": [["n1", "n2"], ["n1"], ["n3"]],
            "start": [t(1, 6), t(2, 0), dt.datetime(2026, 10, 31, 12, tzinfo=UTC)],  # the last began before the window
            "end": [t(1, 18), t(3, 0), t(1, 12)],
        }
    ).with_columns(pl.col("start", "end").cast(pl.Datetime("us", "UTC")))
    got = dict(busy_days(jt, t0, end).sort("node").iter_rows())
    assert got == pytest.approx({"n1": 1.5, "n2": 0.5, "n3": 0.5})


def test_evaluation_scores_the_interruption_rate_and_prints_the_up_time_rate():
    truth = pl.DataFrame(
        {
            "level": ["fleet", "provider", "provider"],
            "provider": [None, "a", "b"],
            "rate_per_1k": [9.0, 10.0, 42.7],
            "interruption_rate_per_1k": [8.8, 9.8, 41.7],
        }
    )
    sb = pl.DataFrame(
        {
            "level": ["provider", "provider", "cluster"],
            "provider": ["a", "b", "b"],
            "rate_per_1k": [9.0, 33.3, 33.3],
            "ci_low": [6.0, 26.1, 26.1],
            "ci_high": [13.0, 42.0, 42.0],
        }
    )
    pr = provider_rates(truth, sb).sort("provider")
    assert pr["true_rate"].to_list() == [9.8, 41.7]
    assert pr["covered"].to_list() == [True, True]
    assert pr["covered_up_time_rate"].to_list() == [True, False]
    # a truth folder from before the interruption rate is scored on the generation rate
    old = provider_rates(truth.drop("interruption_rate_per_1k"), sb).sort("provider")
    assert old["true_rate"].to_list() == [10.0, 42.7] and old["covered"].to_list() == [True, False]
    # a provider the warehouse never measured is not covered
    missing = provider_rates(truth, sb.filter(pl.col("provider") == "a")).sort("provider")
    assert missing["covered"].to_list() == [True, False]
