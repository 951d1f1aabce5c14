"""Known issues applied to the incidents and failed jobs of real lines (tests/helpers/known.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import polars as pl
import pytest
from helpers.known import DAY, KNOWN_ISSUES, make_known_landing

from faultline.analytics.build import compute
from faultline.analytics.known_issues import parse
from faultline.analytics.known_matches import deciding_events, driver_loads
from faultline.analytics.rates import covered_days
from faultline.ingest.landing import read_inventory
from faultline.ingest.partition import ingest_partition


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = make_known_landing(tmp_path_factory.mktemp("known") / "landing")
    parts = [ingest_partition(root, p, c, DAY) for p, c in (("acme", "c1"), ("bolt", "c2"))]
    cat = lambda name: pl.concat([getattr(p, name) for p in parts], how="diagonal_relaxed")  # noqa: E731
    days = covered_days([(p, c, dt.date.fromisoformat(DAY)) for p, c in (("acme", "c1"), ("bolt", "c2"))])
    return cat("events"), cat("jobs"), cat("flight"), read_inventory(root), days


@pytest.fixture(scope="module")
def tables(inputs):
    return compute(*inputs, known=parse(KNOWN_ISSUES))


def _job(t, job_id):
    return t["job_failures"].filter(pl.col("job_id") == job_id).row(0, named=True)


def test_an_entry_scoped_to_one_cluster_matches_there_and_nowhere_else(tables):
    c1, c2 = _job(tables, "101"), _job(tables, "200")  # the same Xid 31 line on acme/c1 and bolt/c2
    assert c1["known_issue_id"] == "KI-31"
    assert c2["known_issue_id"] is None and c2["root_cause"] == "user_app" and c2["original_root_cause"] is None
    m = tables["known_issue_matches"].filter(pl.col("known_issue_id") == "KI-31")
    assert m.select("kind", "ref", "state", "overridden").rows() == [("job_failure", "acme/c1/101", "applied", True)]


def test_an_override_changes_the_verdict_and_says_by_which_entry(tables, inputs):
    j = _job(tables, "101")
    assert (j["root_cause"], j["domain"], j["action"]) == ("driver_firmware", "software", "contact_provider")
    assert (j["original_root_cause"], j["original_action"]) == ("user_app", "fix_application")
    assert j["decided_by"] == "node:nvrm_xid+known_issue:KI-31"
    plain = compute(*inputs)  # no registry: the rules' verdict
    p = _job(plain, "101")
    assert (p["root_cause"], p["decided_by"], p["known_issue_id"]) == ("user_app", "node:nvrm_xid", None)
    # the override counts downstream: the scoreboard now calls it an infrastructure failure
    infra = lambda t: t["provider_scoreboard"].filter(pl.col("cluster") == "c1")["infra_failed_jobs"][0]  # noqa: E731
    assert infra(tables) == infra(plain) + 1


def test_an_expired_entry_stops_matching_and_is_flagged_as_still_matching(tables):
    inc = tables["incidents"].filter(pl.col("category") == "gpu_bus_lost").row(0, named=True)
    assert inc["known_issue_id"] is None and inc["original_category"] is None
    assert _job(tables, "100")["known_issue_id"] is None
    m = tables["known_issue_matches"].filter(pl.col("known_issue_id") == "KI-79-old")
    assert sorted(m["state"].to_list()) == ["after_expiry"] * 3 and m["kind"].to_list().count("incident") == 1
    k = tables["known_issues"].filter(pl.col("known_issue_id") == "KI-79-old").row(0, named=True)
    assert (k["status"], k["incidents"], k["jobs"], k["matches_after_end"]) == ("expired", 0, 0, 3)
    assert k["last_after_end"] == dt.datetime(2026, 11, 24, 3, 0, tzinfo=dt.timezone.utc)  # the Xid 79 line


def test_node_and_driver_scope_and_the_cost_summary(tables):
    inc = tables["incidents"].filter(pl.col("category") == "gpu_hardware").row(0, named=True)
    assert (inc["node"], inc["known_issue_id"]) == ("node-b02", "KI-gsp")
    k = {r["known_issue_id"]: r for r in tables["known_issues"].to_dicts()}
    assert (k["KI-gsp"]["incidents"], k["KI-gsp"]["jobs"], k["KI-gsp"]["drain"], k["KI-gsp"]["status"]) == (
        1,
        0,
        True,
        "open",
    )
    assert (k["KI-31"]["jobs"], k["KI-31"]["jobs_since_opened"], k["KI-31"]["nodes"]) == (1, 1, 1)
    assert k["KI-31"]["gpu_hours_lost_since_opened"] == round(8 * 32 / 60, 3)
    assert k["KI-31"]["verdict"] == "root_cause driver_firmware, action contact_provider"
    assert [r["line"] for r in tables["known_issues"].to_dicts()] == [3, 13, 18]


def test_driver_versions_come_from_the_load_banner(inputs):
    events = inputs[0]
    loads = driver_loads(events)
    assert loads.select("node", "driver").rows() == [("node-b02", "550.144.03")]
    other = parse(KNOWN_ISSUES.replace("driver: 550.144.03", "driver: 570.158.01"))
    t = compute(*inputs, known=other)
    assert t["incidents"]["known_issue_id"].drop_nulls().to_list() == []


def test_the_deciding_event_of_each_job_is_found_again(tables, inputs):
    d = deciding_events(tables["job_failures"], inputs[0]).sort("job_id")
    assert d.select("job_id", "xid").rows() == [("100", 79), ("101", 31), ("102", 79), ("200", 31)]


def test_file_order_decides_and_shadowed_matches_are_counted(inputs):
    extra = KNOWN_ISSUES + (
        "  - id: KI-31-all\n    title: any Xid 31\n    match: {xid: 31}\n"
        "    verdict: {root_cause: gpu_hardware}\n    opened: 2026-11-01\n"
    )
    t = compute(*inputs, known=parse(extra))
    assert _job(t, "101")["known_issue_id"] == "KI-31" and _job(t, "200")["known_issue_id"] == "KI-31-all"
    assert _job(t, "200")["root_cause"] == "gpu_hardware"
    m = t["known_issue_matches"].filter(pl.col("known_issue_id") == "KI-31-all")
    assert sorted(m.select("ref", "state").rows()) == [("acme/c1/101", "shadowed"), ("bolt/c2/200", "applied")]


def test_reapplying_is_idempotent_and_a_changed_file_replaces_the_old_result(tables, inputs):
    from helpers.hashes import frame_hash

    again = compute(*inputs, known=parse(KNOWN_ISSUES))
    for name in ("incidents", "job_failures", "known_issue_matches", "known_issues"):
        assert frame_hash(again[name]) == frame_hash(tables[name]), name
    reg = parse(KNOWN_ISSUES)
    without = dataclasses.replace(reg, issues=tuple(k for k in reg.issues if k.id != "KI-31"))
    t = compute(*inputs, known=without)
    j = _job(t, "101")
    assert (j["root_cause"], j["known_issue_id"], j["decided_by"]) == ("user_app", None, "node:nvrm_xid")
    assert "KI-31" not in t["known_issues"]["known_issue_id"].to_list()
