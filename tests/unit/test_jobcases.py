"""How bench/eval_jobs.py scores a case's culprit, and its floors (faultline.analytics.jobcases)."""

from __future__ import annotations

from pathlib import Path

from faultline.analytics.jobcases import DEV_FLOORS, Case, culprit_ok, misses, same_node, score


def case(node, rank) -> Case:
    return Case("c", Path("."), "network", node, rank, [], [])


def test_node_names_match_by_host_not_by_domain_or_ip_prefix():
    assert same_node("ip-172-31-45-209", "ip-172-31-45-209.eu-north-1.compute.internal")
    assert same_node("DESKTOP-1CE5APL", "desktop-1ce5apl")
    assert not same_node("10.0.7.5", "10.0.7.57") and not same_node("10.0.7.58", "10.0.7.57")
    assert not same_node(None, "gpu617") and not same_node("ng30903-ib.narval.calcul.quebec", "ng30903")


def test_a_culprit_is_right_when_every_field_the_case_knows_is():
    assert culprit_ok(case(None, None), "n1", 3) is None
    assert culprit_ok(case("kolyoz2", None), "kolyoz2", 7) is True
    assert culprit_ok(case("gpu617", 0), "gpu617", None) is False
    assert culprit_ok(case(None, 12), None, 12) is True


def test_misses_names_each_figure_under_its_floor():
    good = {"root_cause": 1.0, "culprit": 1.0, "unknown_share": 0.0}
    s = {"diagnose": good, "nightly": {**good, "unknown_share": 0.9}, "agree": 1.0, "diagnose_failed": 0}
    assert misses(s) == [f"nightly unknown_share 0.9 (floor {DEV_FLOORS['unknown_share']})"]


def test_agreement_counts_only_cases_both_paths_could_read():
    row = {"truth": "network", "diagnose": "network", "nightly": "network", "failed": False}
    row |= {"diagnose_culprit": None, "nightly_culprit": None}
    rows = [{**row, "agree": True}, {**row, "agree": False}, {**row, "agree": None}]
    assert score(rows)["agree"] == 0.5
