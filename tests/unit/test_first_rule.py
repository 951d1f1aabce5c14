"""``first_rule`` (each rule tried only on lines holding one of its keywords) gives exactly the
rule index of ``first_rule_chain`` (every pattern over every line), line for line, on every
rule example, the real-format classification cases, the captured real logs, the loghub HPC
samples and a generated mixed log."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from faultline.classify.engine import first_rule, first_rule_chain
from faultline.classify.ruleset import load_ruleset

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGHUB = FIXTURES / "loghub"


@pytest.fixture(scope="module")
def rs():
    return load_ruleset()


def _same(lines: list[str], rs) -> pl.Series:
    msgs = pl.Series("msg", lines, dtype=pl.String)
    got, want = first_rule(msgs, rs), first_rule_chain(msgs, rs)
    diff = [(line, g, w) for line, g, w in zip(lines, got.to_list(), want.to_list()) if g != w]
    assert diff == [], diff[:5]
    return want


def test_rule_examples(rs):
    lines = [
        e
        for p in sorted((ROOT / "models" / "rules").glob("*.yaml"))
        for r in yaml.safe_load(p.read_text())["rules"]
        for e in r["examples"]
    ]
    want = _same(lines, rs)
    assert len(lines) > 300 and want.null_count() == 0  # every example is some rule's


def test_classification_cases_and_captured_real_logs(rs):
    cases = [c["line"] for c in yaml.safe_load((FIXTURES / "classify_cases.yaml").read_text())["cases"]]
    real = [
        line
        for p in sorted((FIXTURES / "real").glob("*.log"))
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    want = _same(cases + real, rs)
    assert want.null_count() < len(cases) + len(real)


def test_loghub_hpc_samples(rs):
    lines = [
        line
        for p in sorted(LOGHUB.glob("*.log"))
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    assert len(lines) >= 6000
    _same(lines, rs)


def test_generated_mixed_log(rs, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from mixed_log import generate

    path = tmp_path / "mixed.log"
    generate(str(path), 4 << 20)
    lines = path.read_text(encoding="utf-8").splitlines()
    hit = pl.Series(lines).str.contains(rs.prefilter)
    cand = [line for line, h in zip(lines, hit.to_list()) if h]  # what classification sees
    want = _same(cand, rs)
    assert want.is_not_null().sum() > 20
