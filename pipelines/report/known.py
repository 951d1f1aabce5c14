"""Known vs new in the do-first list and the new signatures: the known-issues entries
(``known_issues``, ``known_issue_matches``) that carry a row's failures; a row none carries is new."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..classify.training_data import mask
from ..lake import queries as Q

ENTRY_COLUMNS = ("known_issue_id", "title", "status", "ticket", "drain")

# an entry carries a signature when it carries an incident or a failed job that one of the
# signature's templates decided (the incident's first event, the job's first deciding line)
_CARRIED_TEMPLATES = """
WITH carried AS (
    SELECT first_event_id AS event_id, known_issue_id FROM incidents WHERE known_issue_id IS NOT NULL
    UNION ALL
    SELECT evidence_events[1], known_issue_id FROM job_failures
    WHERE known_issue_id IS NOT NULL AND len(evidence_events) > 0
)
SELECT e.template, split_part(e.message, chr(10), 1) AS message, c.known_issue_id, count(*) AS n
FROM carried c JOIN events e ON e.event_id = c.event_id
GROUP BY ALL
"""


@dataclass
class Known:
    """The registry as the warehouse holds it (empty when its analytics predate it)."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_node: dict[tuple, Counter] = field(default_factory=dict)  # (provider, cluster, node) -> entry: matches
    by_rack: dict[tuple, Counter] = field(default_factory=dict)  # (provider, cluster, rack) -> entry: matches
    by_template: dict[str, Counter] = field(default_factory=dict)

    def says_drain(self, known_issue_id: str | None) -> bool:
        """The entry is in force (open or quiet) and says to drain the nodes it hits."""
        e = self.entries.get(known_issue_id or "")
        return bool(e and e["drain"] and e["status"] in ("open", "quiet"))

    def describe(self, counts: Counter) -> list[dict[str, Any]]:
        """The entries of ``counts`` (entry id: failures it carries), most failures first."""
        ids = sorted(counts, key=lambda k: (-counts[k], k))
        return [{**self.entries.get(k, {"known_issue_id": k}), "matches": counts[k]} for k in ids]


def load(con) -> Known:
    views = Q.run_sql(con, "SELECT view_name FROM duckdb_views() WHERE view_name = 'known_issue_matches'")
    if views.is_empty():
        return Known()
    entries = Q.run_sql(con, f"SELECT {', '.join(ENTRY_COLUMNS)} FROM known_issues ORDER BY known_issue_id")
    hits = Q.run_sql(
        con,
        "SELECT provider, cluster, rack, node, known_issue_id, count(*) AS n FROM known_issue_matches "
        "WHERE state = 'applied' GROUP BY ALL",
    )
    out = Known(entries={e["known_issue_id"]: e for e in entries.to_dicts()})
    for h in hits.to_dicts():
        if h["node"]:
            out.by_node.setdefault((h["provider"], h["cluster"], h["node"]), Counter())[h["known_issue_id"]] += h["n"]
        if h["rack"]:
            out.by_rack.setdefault((h["provider"], h["cluster"], h["rack"]), Counter())[h["known_issue_id"]] += h["n"]
    carried = Q.run_sql(con, _CARRIED_TEMPLATES)
    # keyed like unknown_signatures: the message masked now, and the lake's template
    carried = carried.with_columns(masked=mask(carried["message"].fill_null("")))
    for t in carried.to_dicts():
        for key in {t["masked"], t["template"]} - {None, ""}:
            out.by_template.setdefault(key, Counter())[t["known_issue_id"]] += t["n"]
    return out


def annotate_drain(rows: list[dict[str, Any]], known: Known) -> list[dict[str, Any]]:
    """Each do-first row with ``known``: the entries that carry the night's failures behind it
    and, for a lemon or bad-rack flag, those that carry the node's or rack's (whole history)."""
    for r in rows:
        counts = Counter(r.pop("known_ids", {}))
        if r.get("flagged"):  # the history holds the night's too
            where = (r["provider"], r["cluster"], r["name"])
            counts = Counter((known.by_rack if r["kind"] == "rack" else known.by_node).get(where, {})) or counts
        r["known"] = known.describe(counts)
    return rows


def annotate_signatures(signatures: list[dict[str, Any]], known: Known, templates: dict[str, list[str]]):
    """Each new signature with ``known``: the entries that carry failures one of its templates
    decided (``templates``: signature id to its templates)."""
    for s in signatures:
        counts: Counter = Counter()
        for t in templates.get(s["signature_id"], [s["template"]]):
            counts.update(known.by_template.get(t, {}))
        s["known"] = known.describe(counts)
    return signatures
