"""Lost work, drained nodes, goodput and the effective price (analytics/goodput.py) on small
hand-built tables: exact results for each way a loss is measured."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from faultline.analytics.goodput import (
    add_lost_work,
    billed_node_days,
    cost_comparison,
    downtime,
    job_progress,
    provider_costs,
)
from faultline.analytics.prices import parse_prices
from faultline.schema import TABLES

UTC = dt.timezone.utc


def t(h: float, m: float = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 2, tzinfo=UTC) + dt.timedelta(hours=h, minutes=m)


def _jobs(rows: list[tuple]) -> pl.DataFrame:
    cols = ["job_id", "job_name", "user", "submit", "start", "end", "gpus", "nodes"]
    df = pl.DataFrame(rows, schema=cols, orient="row")
    return df.with_columns(provider=pl.lit("p"), cluster=pl.lit("c"), n_nodes=pl.col("gpus") // 8)


def _markers(rows: list[tuple]) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema=["job_id", "line_no", "ts", "marker"], orient="row")
    return df.with_columns(provider=pl.lit("p"), cluster=pl.lit("c"))


JOBS = _jobs(
    [
        # 1 fails at 10:00 after a save at 09:00; resubmitted (same name) and printing progress at 10:40
        ("1", "run-a", "u", t(0), t(6), t(10), 16, ["n1", "n2"]),
        ("2", "run-a", "u", t(10, 5), t(10, 30), t(20), 16, ["n1", "n2"]),
        # 3 never saves; its resubmission printed nothing timed: the cluster's median startup
        ("3", "run-b", "u", t(0), t(1), t(3), 8, ["n3"]),
        ("4", "run-b", "u", t(3, 30), t(4), t(5), 8, ["n3"]),
        # 5 saves, is never resubmitted; 6 has the same name but another user
        ("5", "run-c", "u", t(0), t(2), t(4), 8, ["n4"]),
        ("6", "run-c", "v", t(5), t(5), t(6), 8, ["n4"]),
    ]
)
MARKERS = _markers(
    [
        ("1", 10, t(6, 5), "progress"),
        ("1", 11, t(9), "checkpoint_save"),
        ("2", 1, t(10, 38), "checkpoint_load"),
        ("2", 2, t(10, 40), "progress"),
        ("3", 1, t(1, 10), "progress"),
        ("4", 1, None, "progress"),
        ("5", 1, t(2, 20), "progress"),
        ("5", 2, t(3, 30), "checkpoint_save"),
        ("6", 1, t(5, 30), "progress"),
    ]
)


def _failures(ids: list[str]) -> pl.DataFrame:
    j = JOBS.filter(pl.col("job_id").is_in(ids))
    return j.select(
        "job_id",
        "provider",
        "cluster",
        "job_name",
        "user",
        "gpus",
        started=pl.col("start"),
        ended=pl.col("end"),
        domain=pl.lit("hardware"),
        root_cause=pl.lit("gpu_bus_lost"),
    )


@pytest.fixture(scope="module")
def lost():
    out = add_lost_work(_failures(["1", "3", "5"]), JOBS, job_progress(MARKERS))
    return {r["job_id"]: r for r in out.to_dicts()}


def test_lost_work_since_the_last_checkpoint_plus_the_restart_startup(lost):
    r = lost["1"]
    assert r["checkpoint_at"] == t(9) and r["lost_work_method"] == "checkpoint"
    assert r["lost_work_gpu_hours"] == 16.0  # 16 GPUs x 1 h
    assert (r["resumed_by"], r["restart_method"]) == ("2", "progress_line")
    assert (r["restart_wait_s"], r["restart_s"]) == (1800.0, 2400.0)  # start 10:30, progress 10:40
    assert r["restart_gpu_hours"] == pytest.approx(16 * 10 / 60)
    assert r["lost_gpu_hours"] == pytest.approx(16 + 16 / 6) == r["lost_gpu_hours_low"] == r["lost_gpu_hours_high"]
    assert r["ettr"] == pytest.approx(3 / (4 + 2400 / 3600))


def test_no_checkpoint_line_counts_the_whole_run_as_an_upper_bound_and_estimates_the_startup(lost):
    r = lost["3"]
    assert r["checkpoint_at"] is None and r["lost_work_method"] == "no_checkpoint_upper_bound"
    assert r["lost_work_gpu_hours"] == 16.0  # 8 GPUs x 2 h
    assert (r["resumed_by"], r["restart_method"]) == ("4", "estimated")
    # the cluster's median startup over jobs with a timed first progress line: 5, 10, 10, 20 minutes
    startup_h = 10 / 60
    assert r["restart_gpu_hours"] == pytest.approx(8 * startup_h)
    assert r["lost_gpu_hours_low"] == 0.0
    assert r["lost_gpu_hours_high"] > r["lost_gpu_hours"] > r["lost_work_gpu_hours"]


def test_a_job_nobody_resubmitted_has_no_restart(lost):
    r = lost["5"]
    assert r["lost_work_gpu_hours"] == pytest.approx(8 * 0.5)  # saved 03:30, ended 04:00
    assert (r["resumed_by"], r["restart_method"], r["restart_gpu_hours"]) == (None, "not_resumed", None)
    assert r["lost_gpu_hours"] == pytest.approx(4.0) and r["ettr"] == pytest.approx(1.5 / 2)


def test_first_progress_is_the_first_progress_line_even_when_it_has_no_time():
    p = job_progress(MARKERS).filter(pl.col("job_id") == "4")
    assert p["first_progress"].to_list() == [None]


def _events(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["node", "ts", "rule_id"], orient="row").with_columns(
        provider=pl.lit("p"), cluster=pl.lit("c")
    )


def test_a_drained_node_is_down_until_its_next_boot_or_job():
    ev = _events(
        [
            ("n1", t(1), "slurmctld_node_reason_set"),  # boot at 02:00, next job at 02:10
            ("n1", t(2), "nvrm_gpu_identity"),
            ("n1", t(2), "nvrm_gpu_identity"),
            ("n2", t(3), "slurmctld_node_reason_set"),  # no boot: its next job at 05:00
            ("n2", t(3, 30), "slurmctld_nodes_not_responding_down"),  # merged into the one above
            ("n3", t(20), "slurmctld_node_reason_set"),  # nothing after it: the end of the covered day
            ("n4", t(4), "nvrm_xid"),  # not a drain
        ]
    )
    jobs = pl.DataFrame(
        {
            "provider": ["p", "p"],
            "cluster": ["c", "c"],
            "nodes": [["n1"], ["n2"]],
            "start": [t(2, 10), t(5)],
        }
    )
    days = pl.DataFrame({"provider": ["p"], "cluster": ["c"], "date": [dt.date(2026, 11, 2)]})
    d = downtime(ev, jobs, days).to_dicts()
    assert [(r["node"], r["start"], r["end"], r["end_low"], r["end_high"]) for r in d] == [
        ("n1", t(1), t(2), t(2), t(2, 10)),
        ("n2", t(3), t(5), t(3, 30), t(5)),  # certainly down until its second DOWN line
        ("n3", t(20), t(24), t(20), t(24)),
    ]


def test_goodput_and_the_effective_price_of_a_provider():
    inv = pl.DataFrame(
        {
            "provider": ["p", "p"],
            "cluster": ["c", "c"],
            "node": ["n1", "n2"],
            "gpus": [8, 8],
            "gpu_model": ["H100", "H100"],
            "in_service_from": [None, dt.date(2026, 11, 2)],
            "in_service_to": [None, None],
        }
    )
    days = pl.DataFrame(
        {"provider": ["p"] * 2, "cluster": ["c"] * 2, "date": [dt.date(2026, 11, 1), dt.date(2026, 11, 2)]}
    )
    prices = parse_prices(b"provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\np,*,H100,2.0,,\n")
    billed = billed_node_days(inv, days, prices)  # n1 two days, n2 one: 3 node-days
    failures = pl.DataFrame(
        {
            "provider": ["p", "p"],
            "cluster": ["c", "c"],
            "ended": [t(10), t(12)],
            "domain": ["hardware", "user"],
            "lost_gpu_hours": [24.0, 10.0],
            "lost_gpu_hours_low": [24.0, 10.0],
            "lost_gpu_hours_high": [24.0, 10.0],
            "lost_work_method": ["checkpoint", "checkpoint"],
        }
    )
    jobs = pl.DataFrame(
        schema={k: TABLES["jobs"][k] for k in ("provider", "cluster", "start", "end", "gpus", "n_nodes")}
    )
    down = pl.DataFrame(
        {
            "provider": ["p"],
            "cluster": ["c"],
            "node": ["n1"],
            "start": [t(1)],
            "end": [t(4)],
            "end_low": [t(4)],
            "end_high": [t(4)],
        }
    )
    costs = provider_costs(failures, jobs, down, billed, priced=True)
    p = costs.filter(pl.col("level") == "provider").row(0, named=True)
    assert p["billed_gpu_hours"] == 3 * 8 * 24 and p["usd_paid"] == 3 * 8 * 24 * 2.0
    assert (p["lost_gpu_hours_infra"], p["lost_gpu_hours_user"], p["down_gpu_hours"]) == (24.0, 10.0, 24.0)
    assert p["useful_gpu_hours"] == 576 - 48 and p["goodput"] == pytest.approx(528 / 576)
    assert p["effective_usd_per_useful_gpu_hour"] == pytest.approx(1152 / 528)
    assert (p["usd_lost_infra"], p["usd_lost_user"], p["usd_down"]) == (48.0, 20.0, 48.0)
    # sampling error of the loss: sqrt(24^2 + 24^2) GPU-hours
    se = (24**2 + 24**2) ** 0.5
    assert p["goodput_se"] == pytest.approx(se / 576)
    assert p["goodput_low"] == pytest.approx(1 - (48 + 1.959964 * se) / 576, rel=1e-6)
    assert p["usd_fleet_work_at_this_rate"] == pytest.approx(528 * 1152 / 528)
    # without prices: the same GPU-hours, no dollars
    bare = provider_costs(failures, jobs, down, billed_node_days(inv, days, None), priced=False)
    b = bare.filter(pl.col("level") == "provider").row(0, named=True)
    assert b["goodput"] == p["goodput"] and b["usd_paid"] is None and b["effective_usd_per_useful_gpu_hour"] is None


def _costs(rows: list[tuple]) -> pl.DataFrame:
    cols = ["provider", "effective_usd_per_useful_gpu_hour", "effective_se", "goodput", "goodput_se", "node_days"]
    return pl.DataFrame(rows, schema=cols, orient="row").with_columns(
        level=pl.lit("provider"), cluster=pl.lit(None, pl.String)
    )


def test_the_comparison_says_when_the_data_tells_providers_apart_and_how_many_node_days_it_needs():
    c = cost_comparison(_costs([("a", 2.00, 0.01, 0.99, 0.001, 1000.0), ("b", 2.10, 0.01, 0.98, 0.001, 1000.0)]))
    r = c.row(0, named=True)
    assert r["distinguishable"] and r["measure"] == "effective_usd_per_useful_gpu_hour"
    assert r["difference"] == pytest.approx(-0.10) and r["more_node_days_needed"] == 0.0
    assert r["statement"].startswith("a is cheaper per useful GPU-hour")
    c = cost_comparison(_costs([("a", 2.00, 0.04, 0.99, 0.01, 1000.0), ("b", 2.05, 0.04, 0.98, 0.01, 1000.0)]))
    r = c.row(0, named=True)
    assert not r["distinguishable"]
    # (1.96 + 0.84)^2 x (0.04^2 + 0.04^2) / 0.05^2 = 10.04 times the node-days, 9,040 more
    assert r["more_node_days_needed"] == pytest.approx(1000 * (2.8016 * (0.0032**0.5) / 0.05) ** 2 - 1000, rel=1e-3)
    c = cost_comparison(_costs([("a", None, None, 0.99, 0.001, 1000.0), ("b", 2.05, 0.04, 0.97, 0.001, 1000.0)]))
    r = c.row(0, named=True)
    assert (
        r["measure"] == "goodput" and r["distinguishable"] and r["statement"].startswith("a delivers more useful work")
    )


def test_a_job_without_output_is_estimated_from_its_other_attempts_or_the_fleets_habits():
    jobs = _jobs(
        [
            ("A1", "train-aa01", "u", t(0), t(0), t(3), 8, ["n1"]),  # no output; its run's A2 saves every 30 min
            ("A2", "train-aa01", "u", t(3, 10), t(4), t(6), 8, ["n1"]),
            ("E1", "eval-x-0001", "u", t(0), t(0), t(1), 8, ["n2"]),  # the eval family never saves
            ("E2", "eval-x-0002", "u", t(1), t(1), t(2), 8, ["n2"]),
            ("E3", "eval-x-0003", "u", t(2), t(2), t(3), 8, ["n2"]),
            ("E4", "eval-x-0009", "u", t(3), t(3), t(5), 8, ["n2"]),  # no output
            ("T1", "train-bb01", "u", t(6), t(6), t(7, 40), 8, ["n3"]),  # no output, a family never seen
        ]
    )
    markers = _markers(
        [
            ("A2", 1, t(4, 1), "progress"),
            ("A2", 2, t(4, 35), "checkpoint_save"),
            ("A2", 3, t(4, 35 + 2 / 60), "checkpoint_save"),  # a second line of the same save
            ("A2", 4, t(5, 5), "checkpoint_save"),
            ("A2", 5, t(5, 35), "checkpoint_save"),
            *[(e, 1, t(h, 1), "progress") for e, h in (("E1", 0), ("E2", 1), ("E3", 2))],
        ]
    )
    progress = job_progress(markers)
    a2 = progress.filter(pl.col("job_id") == "A2").row(0, named=True)
    assert (a2["first_save"], a2["save_every_s"], a2["n_saves"]) == (t(4, 35), 1800.0, 4)
    fail = jobs.filter(pl.col("job_id").is_in(["A1", "E4", "T1"])).select(
        "job_id",
        "provider",
        "cluster",
        "job_name",
        "user",
        "gpus",
        started=pl.col("start"),
        ended=pl.col("end"),
        state=pl.lit("PREEMPTED"),
        domain=pl.lit("symptom"),
    )
    outputs = jobs.filter(pl.col("job_id").is_in(["A2", "E1", "E2", "E3"])).select("provider", "cluster", "job_id")
    out = {r["job_id"]: r for r in add_lost_work(fail, jobs, progress, outputs).to_dicts()}
    # A1: saves 35 min after its start, then every 30: the last at 2 h 35, 25 minutes before its end
    assert out["A1"]["lost_work_method"] == "estimated_from_attempts"
    assert out["A1"]["lost_work_gpu_hours"] == pytest.approx(8 * 25 / 60)
    # E4: its family never saves: the whole run
    assert out["E4"]["lost_work_method"] == "estimated_no_output"
    assert out["E4"]["lost_work_gpu_hours"] == pytest.approx(8 * 2.0)
    # T1 (100 min): 3 of the fleet's 4 long runs with output never saved; the one cadence
    # (first save 5 min + 30, then every 30) leaves 5 minutes: 0.75 x 100 + 0.25 x 5 minutes
    assert out["T1"]["lost_work_gpu_hours"] == pytest.approx(8 * (0.75 * 100 + 0.25 * 5) / 60)
    assert (out["T1"]["lost_gpu_hours_low"], out["T1"]["lost_gpu_hours_high"]) == (0.0, pytest.approx(8 * 100 / 60))
