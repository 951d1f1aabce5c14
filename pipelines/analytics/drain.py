"""The drain list (docs/known-issues.md): lemons, nodes whose last serious fault has no later
reboot, and nodes an open drain-entry hit, with reasons and ``scontrol`` lines for a person or
a script to run (faultline never runs them)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import polars as pl

#: incident actions that leave a node unusable until it is reset, rebooted or repaired
NEEDS_REBOOT = ("reset_gpu", "reboot_node", "drain_node")
SERIOUS = ("error", "critical")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_REASON_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/=+@#%()-]+")
MAX_REASON = 250


@dataclass
class Drain:
    provider: str
    cluster: str
    node: str
    reasons: list[dict] = field(default_factory=list)  # kind, detail

    @property
    def reason(self) -> str:
        return reason_text(self.reasons)

    def command(self) -> str | None:
        """The ``scontrol`` line, or None when the node name is not a plain host name."""
        if not _NODE.fullmatch(self.node):
            return None
        return f'scontrol update nodename={self.node} state=drain reason="{self.reason}"'


def reason_text(reasons: list[dict]) -> str:
    """One Slurm reason: the details joined, reduced to characters that are literal inside
    double quotes for the shell and for scontrol (no quotes, $, `, \\ or !)."""
    text = "faultline: " + "; ".join(r["detail"] for r in reasons)
    text = _REASON_UNSAFE.sub("_", text).strip()
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _ts(v: dt.datetime | None) -> str:
    return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ") if v else "?"


def drain_list(
    lemons: pl.DataFrame,
    incidents: pl.DataFrame,
    boots: pl.DataFrame,
    known_hits: pl.DataFrame,
    inventory: pl.DataFrame,
    as_of: dt.date,
    days: int = 7,
) -> list[Drain]:
    """The nodes to drain from ``lemons`` (lemon_nodes), ``incidents``, ``boots`` (last_boot per
    node), ``known_hits`` (applied matches of open entries that say drain) and ``inventory``
    (in_service_to), one row per node with its reasons."""
    key = ["provider", "cluster", "node"]
    since = dt.datetime.combine(as_of - dt.timedelta(days=days - 1), dt.time(), dt.timezone.utc)
    out: dict[tuple, Drain] = {}

    def add(row: dict, kind: str, detail: str) -> None:
        k = (row["provider"], row["cluster"], row["node"])
        out.setdefault(k, Drain(*k)).reasons.append({"kind": kind, "detail": detail})

    for r in lemons.sort(key).iter_rows(named=True):
        add(r, "lemon", f"lemon ({r['evidence_kind']}: {r['top_category']}, {r['incidents']} incidents)")
    serious = incidents.filter(pl.col("severity").is_in(SERIOUS) & pl.col("action").is_in(NEEDS_REBOOT))
    last = (
        serious.sort("last_ts")
        .group_by(key, maintain_order=True)
        .last()
        .join(boots, on=key, how="left")
        .filter(
            (pl.col("last_ts") >= since) & (pl.col("last_boot").is_null() | (pl.col("last_boot") < pl.col("last_ts")))
        )
        .sort(key)
    )
    for r in last.iter_rows(named=True):
        add(r, "no_reboot", f"{r['category']} {r['severity']} at {_ts(r['first_ts'])}, no reboot since")
    hits = known_hits.filter(pl.col("ts") >= since)
    if hits.height:
        per = (
            hits.group_by([*key, "known_issue_id"])
            .agg(pl.len().alias("n"), pl.col("ticket").first())
            .sort([*key, "known_issue_id"])
        )
        for r in per.iter_rows(named=True):
            ticket = f", ticket {r['ticket']}" if r["ticket"] else ""
            add(r, "known_issue", f"known issue {r['known_issue_id']} ({r['n']}x{ticket})")
    retired = set()
    if "in_service_to" in inventory.columns:
        gone = inventory.filter(pl.col("in_service_to").is_not_null() & (pl.col("in_service_to") < as_of))
        retired = {tuple(r) for r in gone.select(key).iter_rows()}
    return [d for k, d in sorted(out.items()) if k not in retired]


def slurm_text(drains: list[Drain], as_of: dt.date) -> str:
    """Comment header per cluster, then one ``scontrol`` line per node."""
    lines = [
        f"# faultline drain list for {as_of} (UTC): {len(drains)} node(s). Review, then run on each cluster's",
        "# Slurm controller; faultline never runs these.",
    ]
    skipped = 0
    cluster = None
    for d in drains:
        cmd = d.command()
        if cmd is None:
            skipped += 1
            continue
        if (d.provider, d.cluster) != cluster:
            cluster = (d.provider, d.cluster)
            where = _REASON_UNSAFE.sub("_", f"{d.provider}/{d.cluster}")
            lines.append(f"# {where}")
        lines.append(cmd)
    if skipped:
        lines.append(f"# skipped {skipped} node(s) whose name is not a plain host name")
    return "\n".join(lines) + "\n"
