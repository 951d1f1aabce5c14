"""Root cause and culprit of the real failed jobs (tests/fixtures/jobs/) through faultline
diagnose and the nightly pipeline; bench/README.md. Usage:
python bench/eval_jobs.py [--split dev|reserved|both] [--cases] [--json]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from faultline.analytics import jobcases

ROOT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "jobs"


def _line(split: str, s: dict, seconds: float) -> str:
    def f(x) -> str:
        return "-" if x is None else f"{x:.3f}"

    d, n = s["diagnose"], s["nightly"]
    return (
        f"{split}: {s['cases']} cases ({s['culprit_cases']} with a culprit) | "
        f"diagnose: root cause {f(d['root_cause'])}, culprit {f(d['culprit'])}, unknown {f(d['unknown_share'])} | "
        f"nightly: root cause {f(n['root_cause'])}, culprit {f(n['culprit'])}, unknown {f(n['unknown_share'])} | "
        f"agree {f(s['agree'])} | diagnose failed on {s['diagnose_failed']} | {seconds:.0f} s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=["dev", "reserved", "both"], default="both")
    ap.add_argument("--cases", action="store_true", help="list every dev case with both verdicts")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    splits = ["dev", "reserved"] if args.split == "both" else [args.split]
    results = {}
    for split in splits:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"eval-jobs-{split}-") as work:
            try:
                rows = jobcases.evaluate(ROOT / split, work)
            except Exception as exc:
                if split == "dev":
                    raise
                # the reserved split is scored, never shown: no message that could quote it
                print(f"reserved: the evaluation failed ({type(exc).__name__}); run it on dev", file=sys.stderr)
                return 1
        results[split] = jobcases.score(rows)
        results[split]["seconds"] = round(time.perf_counter() - t0, 1)
        if split == "dev" and args.cases:
            for r in rows:
                mark = "ok " if r["diagnose"] == r["truth"] else "BAD"
                print(
                    f"{mark} {r['case']:<55} truth {r['truth']:<18} diagnose {r['diagnose']:<18} "
                    f"nightly {r['nightly'] or '-':<18} culprit {r['diagnose_culprit']!s:<5} "
                    f"{r['culprit']} vs {r['truth_culprit']}  {r['decided_by']}"
                    + ("" if r["agree"] is not False else "  DISAGREE"),
                    file=sys.stderr,
                )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for split, s in results.items():
            print(_line(split, s, s["seconds"]))
        if "dev" in results:
            missed = jobcases.misses(results["dev"])
            print("dev floors: " + ("; ".join(missed) if missed else "all met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
