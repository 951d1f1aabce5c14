"""Which recurring failures `faultline known suggest` proposes, at which scope, and that what it
prints is a valid known-issues file that covers them."""

from __future__ import annotations

import datetime as dt

import polars as pl

from faultline.analytics.known_issues import EMPTY, parse
from faultline.analytics.known_suggest import SUBJECT_SCHEMA, suggest, to_yaml

T0 = dt.datetime(2026, 11, 2, 3, 0, tzinfo=dt.timezone.utc)
AS_OF = dt.date(2026, 11, 20)
LINK = "Nov  2 03:00:00 c-r02-n01 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Link down"


def inventory() -> pl.DataFrame:
    rows = [("p", "c", f"r{r:02d}", f"c-r{r:02d}-n{n:02d}") for r in range(1, 9) for n in range(1, 5)]
    return pl.DataFrame(rows, schema=["provider", "cluster", "rack", "node"], orient="row")


def subject(i: int, node: str, hours: float, rule: str = "mlx5_link_down", xid=None, cat="network", counts=True):
    rack = node.split("-")[1]
    kind = "incident" if counts else "job_failure"
    return {
        "kind": kind,
        "ref": f"{kind}-{i}",
        "provider": "p",
        "cluster": "c",
        "rack": rack,
        "node": node,
        "ts": T0 + dt.timedelta(hours=hours),
        "rule_id": rule,
        "xid": xid,
        "sxid": None,
        "category": cat,
        "template": None,
        "gpu_hours_lost": None if counts else 100.0,
        "sample": LINK,
        "counts": counts,
    }


def frame(rows) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SUBJECT_SCHEMA, orient="row")


def test_a_rack_whose_nodes_share_a_signature_is_proposed_as_the_rack():
    # two episodes of link flaps on all four nodes of rack r02, one job each killed
    rows = [subject(10 * e + n, f"c-r02-n{n:02d}", 30 * e + n / 60) for e in (0, 1) for n in range(1, 5)]
    rows.append(subject(99, "c-r02-n01", 0.5, counts=False))
    rows.append(subject(98, "c-r05-n03", 100))  # the same signature once elsewhere: chance
    (s,) = suggest(frame(rows), inventory(), EMPTY, AS_OF)
    assert (s.level, s.rack, s.node, s.count, s.nodes, s.jobs, s.gpu_hours_lost) == (
        "rack",
        "r02",
        None,
        8,
        4,
        1,
        100.0,
    )
    assert s.p_value < 0.01


def test_a_node_that_fails_alone_is_proposed_as_the_node_and_chance_is_not():
    rows = [subject(i, "c-r03-n02", 40 * i, rule="nvrm_xid", xid=74, cat="nvlink") for i in range(4)]
    rows += [subject(50 + i, f"c-r0{i + 1}-n01", 10 * i, rule="nvrm_xid", xid=79, cat="gpu_bus_lost") for i in range(3)]
    (s,) = suggest(frame(rows), inventory(), EMPTY, AS_OF)
    assert (s.level, s.node, s.xid, s.count, s.most_in_window) == ("node", "c-r03-n02", 74, 4, 4)


def test_too_few_within_a_week_or_outside_the_look_back_is_not_proposed():
    spread = [subject(i, "c-r03-n02", 24 * 8 * i, rule="nvrm_xid", xid=74, cat="nvlink") for i in range(3)]
    assert suggest(frame(spread), inventory(), EMPTY, AS_OF) == []  # three, but a week apart each
    close = [subject(i, "c-r03-n02", i, rule="nvrm_xid", xid=74, cat="nvlink") for i in range(3)]
    assert suggest(frame(close), inventory(), EMPTY, AS_OF, days=3) == []  # before the look-back
    assert len(suggest(frame(close), inventory(), EMPTY, AS_OF)) == 1


def test_the_yaml_pastes_into_a_valid_file_that_covers_what_it_proposed():
    rows = [subject(10 * e + n, f"c-r02-n{n:02d}", 30 * e + n / 60) for e in (0, 1) for n in range(1, 5)]
    rows += [subject(50 + i, "c-r03-n02", 40 * i, rule="nvrm_xid", xid=74, cat="nvlink") for i in range(4)]
    found = suggest(frame(rows), inventory(), EMPTY, AS_OF)
    text = "version: 1\nissues:\n" + to_yaml(found, EMPTY)
    reg = parse(text)
    assert [k.id for k in reg.issues] == ["p-c-r02-mlx5_link_down", "p-c-c-r03-n02-nvrm_xid-xid74"]
    rack, node = reg.issues
    assert (rack.rules, rack.racks, rack.nodes, rack.opened) == (("mlx5_link_down",), ("r02",), (), T0.date())
    assert (node.xids, node.nodes, node.racks) == ((74,), ("c-r03-n02",), ("r03",))
    assert "# e.g. Nov  2 03:00:00 c-r02-n01 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Link down" in text
    assert to_yaml(found, reg).count("- id: p-c-r02-mlx5_link_down-2") == 1  # ids never collide with the file's
