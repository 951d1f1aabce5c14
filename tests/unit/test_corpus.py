"""The real-line corpus (models/corpus/dev.jsonl) scored as bench/eval_lines.py scores it: the dev
split (by the rules, and with the model), and its kernel-side lines alone, hold their floors."""

from __future__ import annotations

import pytest

from faultline.classify import corpus

# measure -> lowest value the dev split may score (codes: Xid/SXid extraction on coded lines)
FLOORS = {"detection": 0.967, "category": 0.895, "codes": 1.0, "context_category": 0.573}
# with the learned model's answer for what the rules call unknown, as the pipeline reports
MODEL_FLOORS = {"detection": 0.971, "category": 0.923, "codes": 1.0}
KERNEL_FLOORS = {"detection": 0.96, "category": 0.911, "codes": 1.0, "context_category": 0.616}
KERNEL_KINDS = ("kernel", "slurmctld")


@pytest.fixture(scope="module")
def scored() -> list[dict]:
    return corpus.classify_excerpts(corpus.load("dev"))


def _below(s: dict, floors: dict) -> dict:
    return {k: (s[k], floor) for k, floor in floors.items() if s[k] < floor}


def test_dev_split_holds_its_floors(scored):
    s = corpus.score(scored)
    assert not _below(s, FLOORS), "measure: (score, floor)"
    assert s["stray_codes"] == 0


def test_with_the_model_the_dev_split_holds_its_floors(scored):
    s = corpus.score(corpus.with_model(scored))
    assert not _below(s, MODEL_FLOORS), "measure: (score, floor)"
    assert s["unknown_share"] < corpus.score(scored)["unknown_share"]


def test_kernel_side_lines_hold_their_floors(scored):
    s = corpus.score([r for r in scored if r["kind"] in KERNEL_KINDS])
    assert s["coded_lines"] > 80
    assert not _below(s, KERNEL_FLOORS), "measure: (score, floor)"
    assert s["stray_codes"] == 0
