"""Propose known-issue entries for failures that recur in one place and that no entry covers:
the same signature at least ``min_count`` times within ``window_days`` on one node, on one rack
(more than its share of its cluster), or on one cluster (more than its share of the fleet)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import yaml

from .known_issues import Registry
from .stats import poisson_excess_p

#: rules too generic to name a failure alone: their suggestions also match the template
GENERIC_RULES = ("error_words",)
#: a rack or cluster must hold this improbably much more than its share (Poisson test)
CONCENTRATION_P = 0.01
SUBJECT_SCHEMA = {
    "kind": pl.String,
    "ref": pl.String,
    "provider": pl.String,
    "cluster": pl.String,
    "rack": pl.String,
    "node": pl.String,
    "ts": pl.Datetime("us", "UTC"),
    "rule_id": pl.String,
    "xid": pl.Int32,
    "sxid": pl.Int32,
    "category": pl.String,
    "template": pl.String,
    "gpu_hours_lost": pl.Float64,
    "sample": pl.String,
    "counts": pl.Boolean,
}


@dataclass
class Suggestion:
    level: str  # node, rack or cluster
    provider: str
    cluster: str
    rack: str | None
    node: str | None
    rule_id: str
    xid: int | None
    sxid: int | None
    category: str
    template: str | None
    count: int
    nodes: int
    most_in_window: int
    first: dt.datetime
    last: dt.datetime
    jobs: int
    gpu_hours_lost: float
    sample: str
    p_value: float | None = None
    refs: list[str] = field(default_factory=list)

    def entry(self, issue_id: str) -> dict:
        """The entry to paste into the known-issues file (no verdict: that is the team's call).
        ``opened`` is its first failure, so the cost since opened is what it has cost so far."""
        match: dict = {"rule": self.rule_id}
        if self.xid is not None:
            match["xid"] = int(self.xid)
        if self.sxid is not None:
            match["sxid"] = int(self.sxid)
        if self.template and (self.rule_id in GENERIC_RULES or self.rule_id.startswith("model:")):
            match["signature"] = self.template
        scope: dict = {"provider": self.provider, "cluster": self.cluster}
        if self.level in ("rack", "node") and self.rack:
            scope["rack"] = self.rack
        if self.level == "node":
            scope["node"] = self.node
        return {"id": issue_id, "title": self.title(), "match": match, "scope": scope, "opened": self.first.date()}

    def title(self) -> str:
        what = self.category + (f" Xid {self.xid}" if self.xid is not None else "")
        what += f" SXid {self.sxid}" if self.sxid is not None else ""
        where = {"node": f"node {self.node}", "rack": f"rack {self.rack}"}.get(self.level, "cluster")
        return f"{what} ({self.rule_id}) recurring on {where} of {self.provider}/{self.cluster}"


def _key_cols() -> list[str]:
    return ["rule_id", "xid", "sxid", "_tpl"]


def _most_in_window(ts: list[dt.datetime], window: dt.timedelta) -> int:
    t = np.array([x.timestamp() for x in sorted(ts)])
    ends = np.searchsorted(t, t + window.total_seconds(), side="left")
    return int((ends - np.arange(len(t))).max()) if len(t) else 0


def suggest(
    subjects: pl.DataFrame,
    inventory: pl.DataFrame,
    registry: Registry,
    as_of: dt.date,
    days: int = 30,
    window_days: int = 7,
    min_count: int = 3,
) -> list[Suggestion]:
    """Suggestions over the ``days`` up to ``as_of`` for ``subjects`` no entry matched
    (``SUBJECT_SCHEMA``): a rack, node or cluster scope where a signature holds improbably more
    than its share of the parent by node count (docs/known-issues.md, "Suggestions")."""
    since = as_of - dt.timedelta(days=days - 1)
    s = subjects.filter(
        (pl.col("ts").dt.date() >= since) & (pl.col("ts").dt.date() <= as_of) & pl.col("rule_id").is_not_null()
    ).with_columns(
        _tpl=pl.when(pl.col("rule_id").is_in(GENERIC_RULES) | pl.col("rule_id").str.starts_with("model:"))
        .then(pl.col("template"))
        .otherwise(pl.lit(None, pl.String)),
    )
    cost = s.filter(~pl.col("counts"))
    s = s.filter(pl.col("counts"))
    window = dt.timedelta(days=window_days)
    per_node = inventory.select("provider", "cluster", "rack", "node").unique(["provider", "cluster", "node"])
    nodes_of = {
        "cluster": {(r[0], r[1]): r[2] for r in per_node.group_by("provider", "cluster").len().iter_rows()},
        "rack": {(r[0], r[1], r[2]): r[3] for r in per_node.group_by("provider", "cluster", "rack").len().iter_rows()},
    }
    fleet = max(per_node.height, 1)
    out: list[Suggestion] = []
    taken: set[str] = set()
    for level, where, spread_by in (
        ("rack", ["provider", "cluster", "rack"], "node"),
        ("node", ["provider", "cluster", "rack", "node"], None),
        ("cluster", ["provider", "cluster"], "rack"),
    ):
        rest = s.filter(~pl.col("ref").is_in(list(taken))) if taken else s
        rest = rest.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in where))
        groups = rest.group_by([*where, *_key_cols()]).agg(
            pl.len().alias("count"),
            pl.col("node").n_unique().alias("nodes"),
            pl.col("ts"),
            pl.col("ref"),
            pl.col("kind"),
            pl.col("node").alias("_nodes"),
            pl.col("rack").alias("_racks"),
            pl.col("gpu_hours_lost"),
            pl.col("category").mode().first(),
            pl.col("template").drop_nulls().mode().first().alias("template"),
            pl.col("sample").sort_by("ts").first(),
        )
        groups = groups.filter(pl.col("count") >= min_count)
        for g in groups.sort([*where, "rule_id", "xid", "sxid"], nulls_last=True).iter_rows(named=True):
            most = _most_in_window(g["ts"], window)
            if most < min_count:
                continue
            if spread_by is not None:
                units = g["_nodes"] if spread_by == "node" else g["_racks"]
                top = max(units.count(u) for u in set(units))
                if len(set(units)) < 2 or 2 * top > len(units):
                    continue  # one node (rack) holds most of it: that node (rack) is the place
            if level == "cluster":
                parent, n_unit, n_all = [], nodes_of["cluster"].get((g["provider"], g["cluster"]), 0), fleet
            else:
                parent = ["provider", "cluster"]
                n_all = nodes_of["cluster"].get((g["provider"], g["cluster"]), 0)
                n_unit = 1 if level == "node" else nodes_of["rack"].get((g["provider"], g["cluster"], g["rack"]), 0)
            p = _share_p(s, g, parent, n_unit, n_all)
            if p >= CONCENTRATION_P:
                continue
            jobs = [h for k, h in zip(g["kind"], g["gpu_hours_lost"]) if k == "job_failure"]
            jobs += _costs(cost, g, where, min(g["ts"]), max(g["ts"]) + dt.timedelta(hours=1))
            out.append(
                Suggestion(
                    level=level,
                    provider=g["provider"],
                    cluster=g["cluster"],
                    rack=g.get("rack"),
                    node=g.get("node"),
                    rule_id=g["rule_id"],
                    xid=g["xid"],
                    sxid=g["sxid"],
                    category=g["category"],
                    template=g["template"],
                    count=g["count"],
                    nodes=g["nodes"],
                    most_in_window=most,
                    first=min(g["ts"]),
                    last=max(g["ts"]),
                    jobs=len(jobs),
                    gpu_hours_lost=float(sum(h or 0.0 for h in jobs)),
                    sample=g["sample"] or "",
                    p_value=p,
                    refs=list(g["ref"]),
                )
            )
            taken.update(g["ref"])
    return sorted(out, key=lambda x: (-x.count, x.provider, x.cluster, x.level, x.rack or "", x.node or ""))


def _costs(cost: pl.DataFrame, g: dict, where: list[str], first, last) -> list[float]:
    """GPU-hours of the failed jobs the group's failures killed (same signature and place)."""
    conds = [(pl.col(c) == g[c]) if g[c] is not None else pl.col(c).is_null() for c in ("rule_id", "xid", "sxid")]
    conds += [pl.col(c) == g[c] for c in where]
    hit = cost.filter(pl.all_horizontal([*conds, pl.col("ts") >= first, pl.col("ts") <= last]))
    return hit["gpu_hours_lost"].fill_null(0.0).to_list()


def _share_p(s: pl.DataFrame, g: dict, parent: list[str], n_unit: int, n_all: int) -> float:
    """P(a count this high) if the signature's occurrences in the parent (the cluster, or the
    fleet) fell on this node, rack or cluster by its share of the parent's nodes."""
    if not n_all or not n_unit or n_unit >= n_all:
        return 1.0  # nothing to compare with (one rack in its cluster, one cluster in the fleet)
    conds = [(pl.col(c) == g[c]) if g[c] is not None else pl.col(c).is_null() for c in _key_cols()]
    total = s.filter(pl.all_horizontal([*conds, *(pl.col(c) == g[c] for c in parent)])).height
    return float(poisson_excess_p(g["count"], total * n_unit / n_all))


_SLUG = re.compile(r"[^A-Za-z0-9_.:-]+")


def issue_id(sug: Suggestion, used: set[str]) -> str:
    place = {"node": sug.node, "rack": sug.rack, "cluster": None}[sug.level]
    parts = [sug.provider, sug.cluster, place, sug.rule_id, f"xid{sug.xid}" if sug.xid is not None else None]
    base = _SLUG.sub("_", "-".join(p for p in parts if p)).strip("_-.:")[:60] or "suggested"
    out, n = base, 2
    while out in used:
        out, n = f"{base[:57]}-{n}", n + 1
    used.add(out)
    return out


def to_yaml(suggestions: list[Suggestion], registry: Registry) -> str:
    """The suggestions as entries to paste under ``issues:``, each with a comment saying why."""
    from ..report.sanitize import terminal

    used = {k.id for k in registry.issues}
    out = []
    for sug in suggestions:
        entry = sug.entry(issue_id(sug, used))
        why = (
            f"# {sug.count} time(s) on {sug.nodes} node(s) from {sug.first:%Y-%m-%d} to {sug.last:%Y-%m-%d} "
            f"(at most {sug.most_in_window} within a week); {sug.jobs} failed job(s), "
            f"{sug.gpu_hours_lost:,.1f} GPU-hours"
            + (f"; p = {sug.p_value:.2g} against its share" if sug.p_value is not None else "")
        )
        out.append(why)
        out.append("# e.g. " + terminal(sug.sample, max_len=200))
        text = yaml.safe_dump([entry], sort_keys=False, allow_unicode=False, width=1000)
        out.append(text.rstrip("\n"))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


SUBJECTS_SQL = r"""
WITH known AS (SELECT DISTINCT kind, ref FROM known_issue_matches)
SELECT 'incident' AS kind, i.incident_id AS ref, i.provider, i.cluster, i.rack, i.node, i.first_ts AS ts,
       e.rule_id,
       CAST(CASE WHEN len(i.xids) > 0 THEN i.xids[1] END AS INTEGER) AS xid,
       CAST(CASE WHEN len(i.sxids) > 0 THEN i.sxids[1] END AS INTEGER) AS sxid,
       coalesce(i.original_category, i.category) AS category, e.template,
       CAST(NULL AS DOUBLE) AS gpu_hours_lost, split_part(i.sample, chr(10), 1) AS sample, true AS counts
FROM incidents AS i
LEFT JOIN events AS e ON e.event_id = i.first_event_id AND e.provider = i.provider AND e.cluster = i.cluster
WHERE coalesce(i.original_severity, i.severity) IN ('error', 'critical')
  AND NOT EXISTS (SELECT 1 FROM known AS k WHERE k.kind = 'incident' AND k.ref = i.incident_id)
UNION ALL
SELECT 'job_failure' AS kind, f.provider || '/' || f.cluster || '/' || f.job_id AS ref, f.provider, f.cluster,
       n.rack, f.culprit_node AS node, f.ended AS ts,
       regexp_extract(f.decided_by, '^node:([^+]+)', 1) AS rule_id,
       TRY_CAST(nullif(regexp_extract(f.evidence, 'Xid \((?:PCI:)?[^)]*\): (\d+)', 1), '') AS INTEGER) AS xid,
       CAST(NULL AS INTEGER) AS sxid, coalesce(f.original_root_cause, f.root_cause) AS category,
       CAST(NULL AS VARCHAR) AS template, f.gpu_hours_lost, split_part(f.evidence, chr(10), 1) AS sample,
       -- a user-blamed Xid is a failure of its own; other node-side verdicts have their incident
       coalesce(f.original_root_cause, f.root_cause) = 'user_app'
           AND regexp_matches(f.evidence, 'Xid \((?:PCI:)?[^)]*\): \d+') AS counts
FROM job_failures AS f
LEFT JOIN inventory_latest AS n ON n.provider = f.provider AND n.cluster = f.cluster AND n.node = f.culprit_node
WHERE f.decided_by LIKE 'node:%' AND f.culprit_node IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM known AS k WHERE k.kind = 'job_failure' AND k.ref = f.provider || '/' || f.cluster || '/' || f.job_id
  )
"""


def load_subjects(con) -> pl.DataFrame:
    """Serious incidents and node-side failed jobs no entry matched, from the views."""
    from ..lake.queries import run_sql

    df = run_sql(con, SUBJECTS_SQL)
    return df.select([pl.col(c).cast(t) for c, t in SUBJECT_SCHEMA.items()])
