"""Score the importable faultline on the dev lines of sources that an older corpus file lacks: run
from an older checkout, it measures how that code does on sources its rules were never written
from (bench/README.md). Usage: python bench/eval_unseen.py --old OLD_DEV.jsonl [--new NEW_DEV.jsonl]"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from faultline.classify import corpus

MEASURES = ("detection", "category", "unknown_share", "false_alarms", "missed")


def _records(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="the older dev.jsonl: its sources are left out")
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent / "models/corpus/dev.jsonl")
    args = ap.parse_args(argv)
    seen = {r["source"] for r in _records(args.old)}
    lines = [r for r in _records(args.new) if r["source"] not in seen]
    if not lines:
        print(f"eval_unseen: {args.new} has no source that {args.old} lacks", file=sys.stderr)
        return 2
    scored = corpus.classify_excerpts(lines)
    sources = len({r["source"] for r in lines})
    for name, sc in (("rules", scored), ("+model", corpus.with_model(scored))):
        s = corpus.score(sc)
        figures = " ".join(f"{k}={s[k]}" for k in MEASURES)
        print(f"eval_unseen {name}: lines={len(lines)} failure={s['failure_lines']} sources={sources} {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
