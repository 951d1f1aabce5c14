"""The known-issues file: what a valid entry holds, and one clear FILE:LINE error per kind of mistake."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from faultline.analytics.known_issues import (
    EMPTY,
    FILE_NAME,
    KnownIssuesError,
    load,
    load_for,
    parse,
    resolve,
)

GOOD = textwrap.dedent(
    """\
    version: 1
    quiet_days: 10
    issues:
      - id: KI-31
        title: Xid 31 on c1 is the driver bug, not the user's code
        match:
          xid: 31
          rule: nvrm_xid
        scope:
          provider: acme
          cluster: [c1]
          driver: 550.144.03
          since: 2026-11-01
        verdict: {root_cause: driver_firmware, action: contact_provider}
        runbook: https://wiki.example/ki-31
        hotfix: "nvidia-smi -r -i $GPU"
        ticket: 4411
        owner: alice
        opened: 2026-11-03
        expires: "2026-12-31"
      - id: flaps.r04
        title: link flaps on rack r04
        match: {rule: mlx5_link_down, message: 'ibp\\d+s0: Link down'}
        scope: {rack: r04}
        opened: 2026-11-02
        closed: 2026-11-20
        drain: true
    """
)


def write(tmp_path, text: str):
    p = tmp_path / FILE_NAME
    p.write_text(text)
    return p


def test_a_valid_file_loads_every_field(tmp_path):
    reg = load(write(tmp_path, GOOD))
    assert reg.quiet_days == 10 and [k.id for k in reg.issues] == ["KI-31", "flaps.r04"]
    a, b = reg.issues
    assert (a.xids, a.rules, a.providers, a.clusters, a.drivers) == (
        (31,),
        ("nvrm_xid",),
        ("acme",),
        ("c1",),
        ("550.144.03",),
    )
    assert (a.since, a.opened, a.expires, a.ends) == (
        dt.date(2026, 11, 1),
        dt.date(2026, 11, 3),
        dt.date(2026, 12, 31),
        dt.date(2026, 12, 31),
    )
    assert (a.root_cause, a.action, a.severity, a.ticket, a.line) == (
        "driver_firmware",
        "contact_provider",
        None,
        "4411",
        4,
    )
    assert a.hotfix == "nvidia-smi -r -i $GPU" and not a.says_drain()
    assert b.message == r"ibp\d+s0: Link down" and b.ends == dt.date(2026, 11, 20) and b.says_drain()
    assert b.line == 21 and not b.overrides and a.overrides


def test_status_open_quiet_expired_closed():
    (a,) = parse("issues:\n- {id: a, title: t, match: {xid: 79}, opened: 2026-11-01, expires: 2026-11-20}\n").issues
    assert a.status(dt.date(2026, 11, 10), dt.date(2026, 11, 9), 14) == "open"
    assert a.status(dt.date(2026, 11, 19), dt.date(2026, 11, 4), 14) == "quiet"
    assert a.status(dt.date(2026, 11, 19), None, 14) == "quiet"  # opened 18 days ago, never seen
    assert a.status(dt.date(2026, 11, 20), dt.date(2026, 11, 19), 14) == "open"  # in force through its expiry day
    assert a.status(dt.date(2026, 11, 21), dt.date(2026, 11, 19), 14) == "expired"
    (c,) = parse("issues:\n- {id: c, title: t, match: {xid: 79}, opened: 2026-11-01, closed: 2026-11-05}\n").issues
    assert c.status(dt.date(2026, 11, 5), dt.date(2026, 11, 5), 14) == "closed"


@pytest.mark.parametrize(
    "text, line, message",
    [
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n  owner_: bob\n",
            6,
            "unknown key 'owner_' in an entry",
        ),
        ("version: 1\nisues: []\n", 2, "unknown key 'isues' in the file"),
        (
            "issues:\n- id: a\n  title: t\n  match:\n    xids: 79\n  opened: 2026-11-01\n",
            5,
            "unknown key 'xids' in match",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  scope: {racks: r1}\n  opened: 2026-11-01\n",
            5,
            "unknown key 'racks' in scope",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  verdict: {cause: x}\n  opened: 2026-11-01\n",
            5,
            "unknown key 'cause' in verdict",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match:\n    message: 'Link (down'\n  opened: 2026-11-01\n",
            5,
            "message is not a valid regular expression",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match:\n    message: '(a{1000}){1000}'\n  opened: 2026-11-01\n",
            5,
            "message is not a valid regular expression",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-13-01\n",
            5,
            "opened must be a date YYYY-MM-DD, not '2026-13-01'",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n  expires: soon\n",
            6,
            "expires must be a date YYYY-MM-DD, not 'soon'",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-05\n  expires: 2026-11-01\n",
            6,
            "expires 2026-11-01 is before opened 2026-11-05",
        ),
        ("issues:\n- id: a\n  title: t\n  match: {xid: 79}\n", 2, "an entry needs 'opened'"),
        ("issues:\n- id: a\n  title: t\n  match: {}\n  opened: 2026-11-01\n", 4, "match needs at least one of"),
        (
            "issues:\n- id: a\n  title: t\n  match: {category: gpu_fell_off}\n  opened: 2026-11-01\n",
            4,
            "category 'gpu_fell_off' is not one of",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {rule: nvrm_xidd}\n  opened: 2026-11-01\n",
            4,
            "unknown rule id 'nvrm_xidd'",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: '79'}\n  opened: 2026-11-01\n",
            4,
            "xid must be a whole number from 1 to 65535",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  scope: {rack: 7}\n  opened: 2026-11-01\n",
            5,
            "rack must be text (quote it: rack: '7')",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  verdict: {action: pray}\n  opened: 2026-11-01\n",
            5,
            "action 'pray' is not one of",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n"
            "- id: a\n  title: u\n  match: {xid: 48}\n  opened: 2026-11-01\n",
            6,
            "id 'a' is used twice (first on line 2)",
        ),
        (
            "issues:\n- id: 'a b'\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n",
            2,
            "id 'a b': letters, digits",
        ),
        (
            "issues:\n- id: a\n  id: b\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n",
            3,
            "key 'id' is given twice",
        ),
        (
            "issues:\n- id: a\n  title: &t hello\n  notes: *t\n  match: {xid: 79}\n  opened: 2026-11-01\n",
            4,
            "anchors and aliases",
        ),
        (
            "issues:\n- id: a\n  title: !!python/object:os.system echo\n  match: {xid: 79}\n  opened: 2026-11-01\n",
            3,
            "tag tag:yaml.org,2002:python/object:os.system is not allowed",
        ),
        (
            "issues:\n- id: a\n  title: t\n  match: {xid: 79}\n  opened: 2026-11-01\n  drain: yes please\n",
            6,
            "drain must be true or false",
        ),
        ("issues:\n- id: a\n  title: t\n  match: {xid: [79, 48\n  opened: 2026-11-01\n", 5, "not valid YAML"),
        ("issues: 3\n", 1, "issues must be a list of entries"),
    ],
)
def test_each_kind_of_mistake_is_one_error_naming_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(KnownIssuesError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_not_utf8_and_too_large(tmp_path):
    p = tmp_path / "k.yaml"
    p.write_bytes(b"issues:\n- id: a\n  title: caf\xe9\n")
    with pytest.raises(KnownIssuesError, match=rf"^{p}:3: not valid UTF-8$"):
        load(p)
    p.write_bytes(b"#" * 1_000_001)
    with pytest.raises(KnownIssuesError, match="1,000,001 bytes"):
        load(p)


def test_which_file_applies(tmp_path, monkeypatch):
    wh = tmp_path / "warehouse"
    monkeypatch.delenv("FAULTLINE_KNOWN_ISSUES", raising=False)
    assert resolve(None, wh) == (tmp_path / FILE_NAME, False)
    assert load_for(None, wh) is EMPTY  # the default is optional
    write(tmp_path, GOOD)
    assert [k.id for k in load_for(None, wh).issues] == ["KI-31", "flaps.r04"]
    monkeypatch.setenv("FAULTLINE_KNOWN_ISSUES", str(tmp_path / "missing.yaml"))
    with pytest.raises(KnownIssuesError, match="cannot read the known-issues file"):
        load_for(None, wh)  # a file named explicitly must exist
    assert resolve(tmp_path / "x.yaml", wh) == (tmp_path / "x.yaml", True)
    assert resolve(None, "s3://bucket/wh")[0] == tmp_path / "missing.yaml"
    monkeypatch.delenv("FAULTLINE_KNOWN_ISSUES")
    assert resolve(None, "s3://bucket/wh") == (None, False)


def test_an_empty_file_or_list_has_no_entries(tmp_path):
    assert load(write(tmp_path, "")).issues == ()
    assert load(write(tmp_path, "# nothing yet\nissues:\n")).issues == ()
