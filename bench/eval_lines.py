"""Score ``faultline classify`` (the rules; ``+model``: with the learned model for what they call
unknown, as the pipeline does) on the real-line corpus (``models/corpus/``); ``--kind`` (repeatable)
scores one kind of line, ``--misses N`` lists up to N wrong lines of the dev split, never reserved."""

from __future__ import annotations

import argparse
import json
import sys
import time

from faultline.classify import corpus


def _table(name: str, s: dict) -> str:
    rows = [
        f"## {name}: {s['lines']} lines ({s['failure_lines']} failure, {s['benign_lines']} benign), "
        f"{s['context_lines']} context lines",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| detection (failure vs benign) | {s['detection']} |",
        f"| category, failure lines | {s['category']} |",
        f"| category, all lines | {s['category_all']} |",
        f"| false alarms (benign called a failure) | {s['false_alarms']} |",
        f"| missed (failure called benign) | {s['missed']} |",
        f"| unknown share of failure lines | {s['unknown_share']} |",
        f"| Xid/SXid extraction ({s['coded_lines']} coded lines) | {s['codes']} |",
        f"| codes on lines that carry none | {s['stray_codes']} |",
        f"| category, context lines | {s['context_category']} |",
        "",
        "| category | lines | precision | recall |",
        "| --- | --- | --- | --- |",
    ]
    rows += [f"| {c} | {v['n']} | {v['precision']} | {v['recall']} |" for c, v in s["per_category"].items()]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=["dev", "reserved", "both"], default="both")
    ap.add_argument("--kind", action="append", choices=["kernel", "job", "slurmctld"], help="only lines of this kind")
    ap.add_argument("--misses", type=int, default=0, help="list up to N wrong dev lines")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--folder", help="read dev.jsonl / reserved.jsonl from this folder (e.g. an older checkout's)")
    args = ap.parse_args(argv)
    splits = ["dev", "reserved"] if args.split == "both" else [args.split]
    results = {}
    for split in splits:
        t0 = time.perf_counter()
        lines = [r for r in corpus.load(split, args.folder) if not args.kind or r["kind"] in args.kind]
        scored = corpus.classify_excerpts(lines)
        results[split] = corpus.score(scored)
        results[split]["seconds"] = round(time.perf_counter() - t0, 2)
        # what the pipeline reports: the model's answer for what the rules call unknown (on dev
        # this is in-sample: the model trains on the dev split)
        results[f"{split}+model"] = corpus.score(corpus.with_model(scored))
        if split == "dev" and args.misses:
            wrong = [r for r in scored if r["pred"]["category"] != r["category"]]
            for r in wrong[: args.misses]:
                print(
                    f"{r['category']:>18} <- {r['pred']['category']:<18} {r['pred']['rule_id'] or '-':<28} "
                    f"{'ctx ' if r['context'] else ''}{r['text'][:150]}",
                    file=sys.stderr,
                )
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for split, s in results.items():
            print(_table(split, s) + "\n")
        for split, s in results.items():  # one greppable line per split
            print(
                f"eval_lines {split}: detection={s['detection']} category={s['category']} "
                f"codes={s['codes']} unknown={s['unknown_share']} lines={s['lines']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
