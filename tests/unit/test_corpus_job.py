"""Floors on the job-output lines of the real-line corpus's dev split (models/corpus/dev.jsonl):
detection, category, context lines, and the rank and node the lines name. The floors are what
the rules reach; a change that loses any of it fails here."""

import pytest

from faultline.classify import corpus


@pytest.fixture(scope="module")
def job_lines():
    recs = [r for r in corpus.load("dev") if r["kind"] == "job"]
    assert len(recs) > 2000
    return corpus.classify_excerpts(recs)


def test_job_lines_detection_and_category(job_lines):
    s = corpus.score(job_lines)
    assert s["failure_lines"] >= 1625 and s["benign_lines"] >= 3460
    assert s["detection"] >= 0.973
    assert s["category"] >= 0.870
    assert s["unknown_share"] <= 0.095
    assert s["false_alarms"] <= 66 and s["missed"] <= 68


def test_job_context_lines_carry_their_event(job_lines):
    assert corpus.score(job_lines)["context_category"] >= 0.526


@pytest.mark.parametrize("field", ["rank", "node"])
def test_rank_and_node_the_lines_name(job_lines, field):
    stated = [r for r in job_lines if field in r]
    assert len(stated) > 150
    wrong = [(r[field], r["pred"][field], r["text"][:80]) for r in stated if r["pred"][field] != r[field]]
    assert wrong == []
