"""bench/first_sight.py: a batch's dev lines, scored by the code before the batch's rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import first_sight  # noqa: E402

from faultline.classify import corpus  # noqa: E402

BATCH_17 = "7382107"  # appended 433 dev records (332 scored lines, 139 of them failures)


def test_the_lines_a_commit_added_are_its_dev_records():
    recs = first_sight.added_dev_lines(BATCH_17)
    assert len(recs) == 433
    assert {corpus.split_of(r["source"]) for r in recs} == {"dev"}


@pytest.mark.parametrize(
    "thresholds, want",
    [
        ("", [("default", 332, 139, 0.8735, 0.7266)]),  # the parent's own threshold, 0.6
        ("0.6,0.5", [(0.6, 332, 139, 0.8735, 0.7266), (0.5, 332, 139, 0.8735, 0.7194)]),
    ],
)
def test_the_parent_scores_the_batch_and_leaves_no_worktree(thresholds, want):
    rows = first_sight.score_at_parent(BATCH_17, [], thresholds)
    assert [(r["threshold"], r["lines"], r["failure_lines"], r["detection"], r["category"]) for r in rows] == want
    trees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "first-sight-" not in trees
