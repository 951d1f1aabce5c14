"""Score corpus lines at first sight: the dev lines a commit added to models/corpus/, classified
(rules, then the model at a threshold) by the code of that commit's parent, which never saw them;
``--overlay`` puts this checkout's copy of some files over the parent's (try a change on lines
no rule was written from). Usage: python bench/first_sight.py COMMIT... [--overlay PATH ...]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"models": "models", "sql": "sql", "deploy": "deploy"}  # pyproject's package-dir

_SCORE = r"""
import json, sys
import polars as pl
from faultline.classify import corpus
from faultline.classify.model import load_model, predict
from faultline.classify.training_data import messages
recs = [json.loads(x) for x in open(sys.argv[1])]
scored = corpus.classify_excerpts(recs)
unk = [i for i, r in enumerate(scored) if r["pred"]["category"] == "unknown"]
for t in [float(x) for x in sys.argv[2].split(",")] if sys.argv[2] else [None]:
    out = [dict(r, pred=dict(r["pred"])) for r in scored]
    if t is None:  # the parent's (or the overlay's) own second opinion, as the pipeline gives it
        out = corpus.with_model(out)
    elif unk:
        msgs = messages([out[i]["text"] for i in unk], [out[i]["kind"] for i in unk])
        got = predict(pl.Series(msgs, dtype=pl.String), model=load_model(), threshold=t)["category"]
        for i, cat in zip(unk, got.to_list()):
            if cat != "unknown":
                out[i]["pred"]["category"] = cat
    s = corpus.score(out)
    print(json.dumps({"threshold": "default" if t is None else t, **{k: s[k] for k in ("lines", "failure_lines", "detection", "category",
          "false_alarms", "missed", "unknown_share")}}))
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def added_dev_lines(commit: str) -> list[dict]:
    """The records ``commit`` appended to models/corpus/dev.jsonl (new lines of its diff)."""
    diff = _git("diff", "--unified=0", f"{commit}^", commit, "--", "models/corpus/dev.jsonl")
    return [json.loads(x[1:]) for x in diff.splitlines() if x.startswith("+{")]


def score_at_parent(commit: str, overlay: list[str], thresholds: str) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="first-sight-") as tmp:
        tree = Path(tmp) / "tree"
        _git("worktree", "add", "--detach", "-q", str(tree), f"{commit}^")
        try:
            for rel in overlay:
                (tree / rel).write_bytes((ROOT / rel).read_bytes())
            shim = Path(tmp) / "shim"
            shim.mkdir()
            (shim / "faultline").symlink_to(tree / "pipelines")
            for name, rel in PACKAGE_DIRS.items():
                (tree / "pipelines" / name).symlink_to(tree / rel)
            lines = Path(tmp) / "lines.jsonl"
            lines.write_text("".join(json.dumps(r) + "\n" for r in added_dev_lines(commit)))
            env = {**os.environ, "PYTHONPATH": str(shim)}
            out = subprocess.run(
                [sys.executable, "-c", _SCORE, str(lines), thresholds],
                check=True,
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp,
            ).stdout
            return [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        finally:
            _git("worktree", "remove", "--force", str(tree))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("commits", nargs="+", help="commits that added corpus lines")
    ap.add_argument("--overlay", action="append", default=[], help="file of this checkout to use (repeatable)")
    ap.add_argument("--thresholds", default="", help="model thresholds, comma-separated (default: the parent's)")
    args = ap.parse_args(argv)
    print("| commit | threshold | lines (failure) | detection | category | false alarms | missed | unknown |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in args.commits:
        for s in score_at_parent(c, args.overlay, args.thresholds):
            print(
                f"| {c} | {s['threshold']} | {s['lines']} ({s['failure_lines']}) | {s['detection']} | {s['category']} "
                f"| {s['false_alarms']} | {s['missed']} | {s['unknown_share']} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
