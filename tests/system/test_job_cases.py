"""The real failed-job outputs of the dev split through ``faultline diagnose`` and the nightly
pipeline (``bench/eval_jobs.py``): the figures stay at their floors and both paths agree."""

from __future__ import annotations

from pathlib import Path

from faultline.analytics import jobcases

DEV = Path(__file__).resolve().parent.parent / "fixtures" / "jobs" / "dev"


def test_dev_cases_hold_their_floors_through_both_paths(tmp_path):
    rows = jobcases.evaluate(DEV, tmp_path)
    s = jobcases.score(rows)
    assert s["cases"] == len(jobcases.load(DEV)) >= 60
    assert jobcases.misses(s) == [], [r["case"] for r in rows if r["agree"] is False]
