"""The real-line corpus (``models/corpus/``): verbatim public lines with provenance and labels.
A fifth of the origins (an issue thread, or a repository for its files) is reserved for scoring
only, chosen by a hash of the origin so that no one picks it."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path

SPLITS = ("dev", "reserved")
_REPO_FILE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+):\S+@[0-9a-f]{40}$")
_GITHUB = re.compile(r"^https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/\d+")


def origin(source: str) -> str:
    """What a source is independent of: its issue/PR thread, or the repository of a file."""
    m = _REPO_FILE.match(source)
    if m:
        return "github.com/" + m.group("repo").lower()
    m = _GITHUB.match(source)
    if m:
        return m.group(0).lower().removeprefix("https://")
    return source.lower().split("#")[0]


def split_of(source: str) -> str:
    """``reserved`` for about one origin in five, ``dev`` for the rest."""
    h = int(hashlib.sha256(("faultline-corpus:" + origin(source)).encode()).hexdigest()[:8], 16)
    return "reserved" if h % 5 == 0 else "dev"


def reserved_by_rank(sources: list[str], salt: str = "faultline-jobs:") -> set[str]:
    """For a small set (the job-output cases): the fifth of origins with the smallest hash,
    so the reserved share is a fifth however the hashes fall."""
    origins = sorted({origin(s) for s in sources}, key=lambda o: hashlib.sha256((salt + o).encode()).hexdigest())
    return set(origins[: -(-len(origins) // 5)])


def corpus_dir() -> Path:
    return Path(str(resources.files("faultline.models").joinpath("corpus")))


def load(split: str = "dev", folder: str | Path | None = None) -> list[dict]:
    """The corpus lines of one split, in file order (excerpts keep their lines together)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    path = Path(folder or corpus_dir()) / f"{split}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- scoring
FAILURE_EXCLUDED = ("benign", "quarantined")


def classify_excerpts(lines: list[dict], models_dir: str | None = None) -> list[dict]:
    """Each line with the verdict ``faultline classify`` gives it: every excerpt is one file."""
    import datetime as dt
    import io

    from ..ingest.lines import per_line_records
    from ..ingest.parse import SourceContext, parse_stream
    from .ruleset import load_ruleset

    rs = load_ruleset(models_dir)
    groups: dict[tuple[str, int], list[dict]] = {}
    for rec in lines:
        groups.setdefault((rec["source"], rec["excerpt"]), []).append(rec)
    out = []
    for (source, _), recs in groups.items():
        date = next((r["date"] for r in recs if r.get("date")), None)
        ref = dt.date.fromisoformat(date) if date else dt.date(2025, 1, 1)
        data = ("\n".join(r["text"] for r in recs) + "\n").encode("utf-8")
        ctx = SourceContext(source=source, kind=recs[0]["kind"], ref_date=ref, full=True)
        got = per_line_records(parse_stream(io.BytesIO(data), ctx, rs), source).sort("line_no").to_dicts()
        for rec, verdict in zip(recs, got):
            out.append({**rec, "pred": verdict})
    return out


def with_model(scored: list[dict], model=None) -> list[dict]:
    """``scored`` with the pipeline's second opinion: the learned model's category (at its
    threshold) for the lines the rules call unknown or place by the subsystem they name, as
    ``faultline run`` gives it to events."""
    import polars as pl

    from .model import load_model, open_to_model, predict
    from .training_data import messages

    preds = pl.DataFrame(
        {k: [r["pred"].get(k) for r in scored] for k in ("category", "rule_id")},
        schema={"category": pl.String, "rule_id": pl.String},
    )
    idx = preds.with_row_index("i").filter(open_to_model(preds.columns))["i"].to_list()
    if not idx:
        return scored
    msgs = messages([scored[i]["text"] for i in idx], [scored[i]["kind"] for i in idx])
    got = predict(pl.Series(msgs, dtype=pl.String), model=model or load_model())["category"].to_list()
    out = list(scored)
    for i, cat in zip(idx, got):
        if cat != "unknown":
            out[i] = {**out[i], "pred": {**out[i]["pred"], "category": cat, "rule_id": "model"}}
    return out


def _ratio(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def score(scored: list[dict]) -> dict:
    """Detection (failure vs benign), category accuracy, per-category precision and recall,
    Xid/SXid extraction and the unknown share, over lines that carry their meaning alone;
    lines marked ``context`` are scored apart."""
    own = [r for r in scored if not r["context"]]
    ctx = [r for r in scored if r["context"]]

    def is_fail(cat: str | None) -> bool:
        return cat not in FAILURE_EXCLUDED and cat is not None

    fail = [r for r in own if is_fail(r["category"])]
    detect = sum(is_fail(r["category"]) == is_fail(r["pred"]["category"]) for r in own)
    cats = sorted({r["category"] for r in own} | {r["pred"]["category"] for r in own})
    per_cat = {}
    for c in cats:
        tp = sum(r["category"] == c and r["pred"]["category"] == c for r in own)
        n_true = sum(r["category"] == c for r in own)
        n_pred = sum(r["pred"]["category"] == c for r in own)
        per_cat[c] = {"n": n_true, "precision": _ratio(tp, n_pred), "recall": _ratio(tp, n_true)}
    coded = [r for r in scored if r.get("xid") is not None or r.get("sxid") is not None]
    codes_ok = sum(r.get("xid") == r["pred"]["xid"] and r.get("sxid") == r["pred"]["sxid"] for r in coded)
    stray = sum(
        (r["pred"]["xid"] is not None or r["pred"]["sxid"] is not None)
        and r.get("xid") is None
        and r.get("sxid") is None
        and not r["context"]
        for r in scored
    )
    return {
        "lines": len(own),
        "failure_lines": len(fail),
        "benign_lines": len(own) - len(fail),
        "detection": _ratio(detect, len(own)),
        "category": _ratio(sum(r["pred"]["category"] == r["category"] for r in fail), len(fail)),
        "category_all": _ratio(sum(r["pred"]["category"] == r["category"] for r in own), len(own)),
        "false_alarms": sum(not is_fail(r["category"]) and is_fail(r["pred"]["category"]) for r in own),
        "missed": sum(is_fail(r["category"]) and not is_fail(r["pred"]["category"]) for r in own),
        "unknown_share": _ratio(sum(r["pred"]["category"] == "unknown" for r in fail), len(fail)),
        "codes": _ratio(codes_ok, len(coded)),
        "coded_lines": len(coded),
        "stray_codes": stray,
        "context_lines": len(ctx),
        "context_category": _ratio(sum(r["pred"]["category"] == r["category"] for r in ctx), len(ctx)),
        "per_category": per_cat,
    }
