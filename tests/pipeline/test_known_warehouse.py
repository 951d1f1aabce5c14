"""Known issues through the warehouse: faultline run and known apply with a file (good and bad),
the report's section, explain, the provider ticket pack and the drain list, on real lines."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.known import KNOWN_ISSUES, make_known_landing

from faultline.analytics.build import build_analytics
from faultline.cli import main
from faultline.lake import views as W
from faultline.launch.local import run_pipeline
from faultline.report import render


@pytest.fixture(scope="module")
def known_wh(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("known-wh")
    landing = make_known_landing(base / "landing")
    wh = base / "warehouse"
    (base / "known_issues.yaml").write_text(KNOWN_ISSUES)  # the default place: beside the warehouse
    run_pipeline(landing, wh, analytics=False)
    build_analytics(wh)
    assert not W.build(wh).errors
    return wh, base / "known_issues.yaml"


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


BAD = {
    "unknown key": ("issues:\n- id: a\n  title: t\n  match: {xid: 31}\n  opened: 2026-11-01\n  tiket: X-1\n", 6),
    "bad regex": ("issues:\n- id: a\n  title: t\n  match: {message: 'Xid (31'}\n  opened: 2026-11-01\n", 4),
    "bad date": ("issues:\n- id: a\n  title: t\n  match: {xid: 31}\n  opened: 2026-02-30\n", 5),
    "not YAML": ("issues:\n- id: a\n  title: [t\n", 4),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_malformed_file_is_one_error_and_leaves_the_warehouse_as_it_was(known_wh, tmp_path, kind):
    wh, _ = known_wh
    text, line = BAD[kind]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    before = files(wh)
    res = CliRunner().invoke(main, ["known", "apply", "--known-issues", str(bad), "--warehouse", str(wh)])
    assert res.exit_code == 1 and res.output.startswith(f"Error: {bad}:{line}: "), res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["known", "check", "--known-issues", str(bad)])
    assert res.exit_code == 1 and f"{bad}:{line}: " in res.output
    assert files(wh) == before


def test_run_refuses_a_malformed_file_before_it_ingests_anything(tmp_path):
    landing = make_known_landing(tmp_path / "landing")
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD["unknown key"][0])
    res = CliRunner().invoke(
        main, ["run", "--landing", str(landing), "--warehouse", str(tmp_path / "wh"), "--known-issues", str(bad)]
    )
    assert res.exit_code == 1 and f"{bad}:6: unknown key 'tiket' in an entry" in res.output
    assert not (tmp_path / "wh").exists()


def test_the_default_file_beside_the_warehouse_was_applied(known_wh):
    wh, path = known_wh
    k = pl.read_parquet(wh / "analytics" / "known_issues.parquet")
    assert k["file"].to_list() == [str(path)] * 3
    assert k.select("known_issue_id", "status").rows() == [
        ("KI-31", "open"),
        ("KI-79-old", "expired"),
        ("KI-gsp", "open"),
    ]


def test_report_separates_new_from_known_and_says_what_was_overridden(known_wh):
    wh, _ = known_wh
    md = render(wh, fmt="md")
    section = md[md.index("### What is new this morning") : md.index("### Provider and cluster scoreboard")]
    new = section[section.index("#### New") : section.index("#### Known")]
    assert "| acme/c1 | gpu\\_bus\\_lost | nvrm\\_xid | 2 | 1 | 34.3 | **tonight** |" in new
    assert "| bolt/c2 | user\\_app | nvrm\\_xid | 1 | 0 | 4.3 | **tonight** |" in new
    assert "pid=0, GPU has fallen off the bus." in new
    assert "KI-31" not in new and "gpu\\_hardware" not in new  # known: listed below
    assert (
        "- job 101 on acme/c1: the rules said user\\_app (fix\\_application), known issue **KI-31** says "
        "driver\\_firmware (contact\\_provider); 4.3 GPU-h" in section
    )
    assert (
        "| KI-31 | Xid 31 on acme/c1 is the driver's bug, not &lt;b&gt;user&lt;/b&gt; code | open | ACME-4411 |"
        in section
    )
    assert "- KI-79-old (expired 2026-11-20): 3 match(es) since" in section  # ended but still matching
    html = render(wh)
    part = html[html.index('<section id="known-issues">') :]
    part = part[: part.index("</section>")]
    assert "not &lt;b&gt;user&lt;/b&gt; code" in part and "<b>user</b>" not in part
    assert "<td><b>KI-31</b></td>" in part and "Ended but still matching (1)" in part
    assert "pid=0, GPU has fallen off the bus." in part


def test_do_first_list_names_the_known_issue_of_each_row(known_wh):
    wh, _ = known_wh
    md = render(wh, fmt="md")
    do_first = md[md.index("### Do first") : md.index("### Infrastructure failures")]
    rows = [r for r in do_first.splitlines() if r.startswith("| node-")]
    # node-b02's Xid 79 jobs match only the expired KI-79-old, its GSP timeout the open KI-gsp
    # (drain: true), so the row drains; node-a17's Xid 31 job is KI-31's
    assert rows[0].startswith("| node-b02 | acme/c1 | drain\\_node | ")
    assert "(known issue KI-gsp says drain)" in rows[0] and rows[0].endswith(
        "| tonight | KI-gsp (ticket ACME-4500, open) |"
    )
    assert rows[1].startswith("| node-a17 | acme/c1 | contact\\_provider | ")
    assert rows[1].endswith("| tonight | KI-31 (ticket ACME-4411, open) |") and len(rows) == 2
    html = render(wh)
    part = html[html.index('<section id="do-first">') : html.index('<section id="headline">')]
    assert "<td>KI-gsp (ticket ACME-4500, open)</td>" in part and "<td>KI-31 (ticket ACME-4411, open)</td>" in part


def test_a_signature_is_known_when_an_entry_carries_a_failure_it_decided(known_wh):
    from faultline.lake import queries as Q
    from faultline.report import known

    wh, _ = known_wh
    con = Q.connect(wh)
    try:
        registry = known.load(con)
        tpl = Q.run_sql(con, "SELECT template FROM events WHERE rule_id = 'nvrm_xid' AND message LIKE '%: 31, %'")
    finally:
        con.close()
    assert registry.says_drain("KI-gsp") and not registry.says_drain("KI-31") and not registry.says_drain(None)
    sigs = [{"signature_id": "s1", "template": "no such template"}, {"signature_id": "s2", "template": "x"}]
    known.annotate_signatures(sigs, registry, {"s1": ["no such template"], "s2": ["x", tpl["template"][0]]})
    assert sigs[0]["known"] == []
    # KI-31 carries job 101 (acme/c1); bolt/c2's Xid 31 (job 200) is out of its scope
    assert [(k["known_issue_id"], k["ticket"], k["matches"]) for k in sigs[1]["known"]] == [("KI-31", "ACME-4411", 1)]


def test_explain_shows_the_known_issue_next_to_the_verdict(known_wh):
    wh, _ = known_wh
    out = cli("explain", "job", "101", "--warehouse", str(wh)).output
    verdict = out.index("Verdict: driver_firmware (software)")
    known = out.index("Known issue KI-31: Xid 31 on acme/c1 is the driver's bug, not <b>user</b> code (open)")
    assert verdict < known < out.index("Evidence:")
    assert "OVERRIDDEN  the rules said user_app (fix_application); this entry says driver_firmware" in out
    assert "runbook     https://wiki.example/ki-31" in out and "hot-fix     nvidia-smi -r -i 0" in out
    assert "Known issue" not in cli("explain", "job", "200", "--warehouse", str(wh)).output
    node = cli("explain", "node", "node-b02", "--warehouse", str(wh)).output
    assert "Known issue KI-gsp: GSP timeouts on node-b02 (open)" in node and "on this node 1 time(s)" in node


def test_ticket_pack_names_gpus_lines_jobs_and_peers(known_wh):
    wh, _ = known_wh
    md = cli("ticket", "node", "node-b02", "--warehouse", str(wh)).output
    assert "acme / c1, rack r1, leaf switch leaf-1; 8 x H100-SXM5-80GB, driver 550.144.03." in md
    assert "| 0000:09:00 | GPU-26fba6b2-9e52-006e-68db-4ce18382a5ea | — | yes |" in md
    assert "| 0000:9b:00 | GPU-509665ad-b600-ac93-3616-d754b23d636d | 1650124014249 | yes |" in md
    assert (
        "- 2026-11-24 03:00:00Z incident gpu\\_bus\\_lost (critical): Nov 24 03:00:00 node-b02 kernel: NVRM: Xid" in md
    )
    assert "2 job(s) interrupted by a hardware or driver fault, 34.3 GPU-hours lost" in md
    assert "| 100 | 2026-11-24 01:00:00Z | 2026-11-24 03:05:00Z | FAILED | 1 | 8 | 16.7 | gpu\\_bus\\_lost |" in md
    assert "1 error line(s) on 1 other node(s), in 1 job(s), named it as their peer." in md
    assert "| nccl\\_connection\\_closed | network | 1 |" in md
    assert "Known issue KI-gsp (open): GSP timeouts on node-b02; our ticket with you: **ACME-4500**" in md
    pack = json.loads(cli("ticket", "node", "node-b02", "--warehouse", str(wh), "--format", "json").output)
    assert [g["pci_slot"] for g in pack["gpus"] if g["involved"]] == ["0000:09:00", "0000:9b:00"]
    assert [j["job_id"] for j in pack["jobs"]] == ["100", "102"] and pack["gpu_hours_lost"] == 34.267
    a17 = json.loads(cli("ticket", "node", "node-a17", "--warehouse", str(wh), "--format", "json").output)
    assert a17["peer_blame"]["addresses"] == ["10.1.2.4"]  # its own IB line's localGid
    res = CliRunner().invoke(main, ["ticket", "node", "nope", "--warehouse", str(wh)])
    assert res.exit_code == 1 and "no node 'nope' in the inventory" in res.output


def test_ticket_markdown_escapes_log_text(known_wh, tmp_path):
    from faultline.report.ticket import markdown

    hostile = "<script>alert(1)</script> | `x` [a](b) \x1b[31m\u202e"
    pack = {
        "node": hostile, "provider": "p", "cluster": "c", "rack": hostile, "leaf_switch": None, "gpu_model": "H100",
        "gpus_in_node": 8, "driver": None, "since": None, "until": None, "gpu_hours_lost": 0.0, "other_failed_jobs": 0,
        "gpus": [{"pci_slot": "0000:3b:00", "uuids": [hostile], "serials": [], "involved": True}],
        "deciding_lines": [{"ts": None, "what": "incident", "line": hostile}], "incidents": [], "jobs": [],
        "peer_blame": {"addresses": [], "lines": 0, "nodes": 0, "jobs": 0, "by_rule": [], "examples": []},
        "known_issues": [], "timeline": [{"ts": None, "kind": "event", "category": "x", "severity": "y", "detail": hostile}],
    }  # fmt: skip
    md = markdown(pack)
    assert "<script>" not in md and "\x1b" not in md and "\u202e" not in md
    assert md.count("&lt;script&gt;alert(1)&lt;/script&gt; \\| \\`x\\` \\[a\\](b) \\[U+202E\\]") == 5


def test_drain_list_prints_scontrol_lines_it_never_runs(known_wh):
    wh, _ = known_wh
    out = cli("drain-list", "--warehouse", str(wh)).output
    lines = [x for x in out.splitlines() if not x.startswith("#")]
    assert lines == [
        'scontrol update nodename=node-b02 state=drain reason="faultline: gpu_bus_lost critical at 2026-11-24T03:00Z, '
        'no reboot since; known issue KI-gsp (1x, ticket ACME-4500)"'
    ]
    assert "# acme/c1" in out
    rows = json.loads(cli("drain-list", "--warehouse", str(wh), "--format", "json").output)["nodes"]
    assert [r["kind"] for r in rows[0]["reasons"]] == ["no_reboot", "known_issue"]


def test_drain_reasons_cannot_break_out_of_their_quotes():
    from faultline.analytics.drain import Drain

    d = Drain("p", "c", "n1", [{"kind": "x", "detail": 'a"; rm -rf / #$(id)`id`\\!\n'}])
    cmd = d.command()
    assert cmd == 'scontrol update nodename=n1 state=drain reason="faultline: a_; rm -rf / #_(id)_id_"'
    assert not any(c in cmd.split('reason="', 1)[1][:-1] for c in '"$`\\!\n')  # nothing the shell expands
    assert Drain("p", "c", "n1;reboot", []).command() is None


def test_known_list_show_and_apply_after_the_file_changed(known_wh, tmp_path):
    wh, path = known_wh
    out = cli("known", "list", "--warehouse", str(wh)).output
    assert "KI-79-old" in out and "(!) still matching after it ended" in out
    show = cli("known", "show", "KI-31", "--warehouse", str(wh)).output
    assert "since opened 1 match(es): 1 failed job(s), 4.3 GPU-hours lost" in show
    assert "applied      job_failure node-a17" in show
    env_before = os.environ.get("FAULTLINE_KNOWN_ISSUES")
    copy = tmp_path / "wh"
    shutil.copytree(wh, copy, symlinks=True)
    edited = tmp_path / "edited.yaml"
    edited.write_text(KNOWN_ISSUES.replace("cluster: c1", "cluster: c2"))
    res = cli("known", "apply", "--known-issues", str(edited), "--warehouse", str(copy))
    f = pl.read_parquet(copy / "analytics" / "job_failures.parquet").sort("job_id")
    assert f.select("job_id", "root_cause", "known_issue_id").rows() == [
        ("100", "gpu_bus_lost", None),
        ("101", "user_app", None),
        ("102", "gpu_bus_lost", None),
        ("200", "user_app", None),  # provider acme and cluster c2: nowhere
    ], res.output
    assert os.environ.get("FAULTLINE_KNOWN_ISSUES") == env_before  # pointed at the file only while it ran
