"""What to do first: the nodes and racks to drain or ticket, each with a one-line reason and a
link to its evidence; every flag in words (which test raised it, what its number means)."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

import polars as pl

from ..analytics.config import DEFAULT
from .sanitize import slug

# actions that take a node (or rack) out of service or need someone to look at it; restart_job
# and fix_application need nobody on the hardware
ACTIONS = ("drain_node", "inspect_hardware", "reboot_node", "reset_gpu", "check_network", "check_storage")
ACTIONS += ("contact_provider",)
RANK = {a: i for i, a in enumerate(ACTIONS)}
CATEGORY_WORDS = {
    "gpu_bus_lost": "GPU fell off the bus",
    "gpu_memory": "GPU memory error",
    "nvlink": "NVLink / NVSwitch fault",
    "gpu_hardware": "GPU hardware fault",
    "driver_firmware": "driver / firmware fault",
    "network": "network fault",
    "host": "host fault (CPU, memory, kernel)",
    "storage": "storage fault",
    "thermal_power": "thermal / power fault",
    "collective_timeout": "collective timeout",
    "user_app": "the program itself",
    "scheduler": "scheduler outcome",
    "unknown": "unknown cause",
}
_XID = re.compile(r"\bS?Xid \(PCI:[^)]*\): (\d+)")
_STAMP = re.compile(r"^\[[^\]]*\] \S+ ")  # "[2026-11-07T05:19:31Z] node " of the evidence line
_KERNEL = re.compile(r"^.*? kernel: (?:\[ *\d+\.\d+\] )?")
_NOTES = re.compile(r" \(\+\d+ watchdog timeout line.*$|; culprit by \S+$")  # attribution's notes on the line
LEMON_TESTS = {
    "rate": "the rate test (its incidents against the rest of its cluster, leave-one-out Poisson)",
    "repeat_signature": "the repeat test (one failure signature, category and rule, recurring on it)",
    "repeat_gpu_fault": (
        f"the repeat-GPU test (one GPU failing the same serious way in separate incidents within "
        f"{DEFAULT.repeat_gpu_fault_window_days:.0f} days, against the cluster's other GPUs)"
    ),
    "repeat_user_xid": "the user-Xid test (Xid 13/31 on one GPU in separate hours: the GPU, not its users)",
}


@lru_cache(maxsize=1)
def xid_names() -> dict[int, str]:
    text = resources.files("faultline.models").joinpath("xid_catalog.csv").read_text(encoding="utf-8")
    return {int(r["xid"]): r["meaning"] for r in csv.DictReader(io.StringIO(text)) if r["xid"].isdigit()}


def message(evidence: str | None) -> str:
    """The evidence's first line without its time, node and syslog prefix."""
    line = (evidence or "").split("\n", 1)[0]
    line = _NOTES.sub("", _STAMP.sub("", line))
    return _KERNEL.sub("", line).strip()


def say(category: str | None, line: str | None, gpu: str | None = None) -> str:
    """One line on a fault: the Xid and its meaning, else the category in words and the line."""
    m = _XID.search(line or "")
    if m and "SXid" not in m.group(0):
        xid = int(m.group(1))
        what = xid_names().get(xid)
        return f"Xid {xid}" + (f" ({what})" if what else "") + (f" on GPU {gpu}" if gpu else "")
    words = CATEGORY_WORDS.get(category or "", category or "?")
    return f"{words}: {message(line)[:110]}" if line else words


def brief(job: dict[str, Any]) -> str:
    """One line on why a job failed (``say`` on its deciding evidence)."""
    return say(job.get("root_cause"), job.get("evidence"), job.get("culprit_gpu"))


def to_drain(
    infra_jobs: list[dict[str, Any]],
    incidents: list[dict[str, Any]],
    lemons: list[dict[str, Any]],
    racks: list[dict[str, Any]],
    says_drain: Callable[[str | None], bool] = lambda _: False,
) -> list[dict[str, Any]]:
    """One row per node or rack to drain or ticket: the night's infrastructure failures and incidents
    whose action needs the hardware (or that an open known issue saying drain carries), every lemon
    and bad rack; the most urgent action wins, the night's rows first (``known_ids``: their entries)."""
    rows: dict[tuple, dict[str, Any]] = {}

    def add(key, target, kind, provider, cluster, action, reason, href, tonight, gpu_hours=0.0, category=None, ki=None):
        r = rows.get(key)
        if r is None:
            r = rows[key] = {
                "target": target,
                "name": key[3],
                "kind": kind,
                "provider": provider,
                "cluster": cluster,
                "action": action,
                "reasons": [],
                "href": href,
                "tonight": False,
                "flagged": False,
                "gpu_hours": 0.0,
                "categories": set(),
                "known_ids": Counter(),
            }
        elif RANK[action] < RANK[r["action"]]:
            r["action"] = action
        r["reasons"].append(reason)
        r["tonight"] = r["tonight"] or tonight
        r["flagged"] = r["flagged"] or not tonight
        r["gpu_hours"] += gpu_hours or 0.0
        if category:
            r["categories"].add(category)
        if ki:
            r["known_ids"][ki] += 1

    def action_of(item: dict[str, Any]) -> str | None:
        if says_drain(item.get("known_issue_id")):
            return "drain_node"
        return item.get("action") if item.get("action") in RANK else None

    def because(item: dict[str, Any], reason: str) -> str:
        ki = item.get("known_issue_id")
        return f"{reason} (known issue {ki} says drain)" if says_drain(ki) else reason

    for j in infra_jobs:
        if j.get("culprit_node") and action_of(j):
            key = (j["provider"], j["cluster"], "node", j["culprit_node"])
            reason = f"{j['brief'].rstrip('.')}; killed job {j['job_id']} ({j['gpu_hours_lost'] or 0:,.1f} GPU-h)"
            add(
                key,
                j["culprit_node"],
                "node",
                j["provider"],
                j["cluster"],
                action_of(j),
                because(j, reason),
                "#" + j["anchor"],
                True,
                j["gpu_hours_lost"],
                j["root_cause"],
                j.get("known_issue_id"),
            )
    for i in incidents:
        if not i.get("node") or not action_of(i) or i.get("rack_shared"):
            continue
        key = (i["provider"], i["cluster"], "node", i["node"])
        if i["category"] in rows.get(key, {}).get("categories", ()):
            if i.get("known_issue_id"):
                rows[key]["known_ids"][i["known_issue_id"]] += 1
            continue  # the incident behind a failure already listed
        reason = f"{say(i['category'], i.get('sample'), i.get('gpu_pci'))}, {i['first_ts']:%H:%M}Z"
        add(
            key,
            i["node"],
            "node",
            i["provider"],
            i["cluster"],
            action_of(i),
            because(i, reason),
            "#node-" + slug(i["node"]),
            True,
            0.0,
            i["category"],
            i.get("known_issue_id"),
        )
    for lem in lemons:
        key = (lem["provider"], lem["cluster"], "node", lem["node"])
        action = lem["action"] if lem["action"] in RANK else "drain_node"
        add(
            key,
            lem["node"],
            "node",
            lem["provider"],
            lem["cluster"],
            action,
            "lemon: " + lem["short"],
            "#" + lem["anchor"],
            False,
        )
    for r in racks:
        key = (r["provider"], r["cluster"], "rack", r["rack"])
        action = r["action"] if r["action"] in RANK else "contact_provider"
        add(
            key,
            f"rack {r['rack']}",
            "rack",
            r["provider"],
            r["cluster"],
            action,
            "bad rack: " + r["short"],
            "#" + r["anchor"],
            False,
        )
    out = sorted(
        rows.values(),
        key=lambda r: (not r["tonight"], RANK[r["action"]], -r["gpu_hours"], r["provider"], r["cluster"], r["target"]),
    )
    for r in out:
        r.pop("categories")
        r["reasons"].sort(key=lambda x: not x.startswith(("lemon:", "bad rack:")))  # the standing flag says most
    return out


def node_evidence(drain: list[dict[str, Any]], incidents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The night's incidents of each listed node whose evidence is an incident (no job, no flag)."""
    out = []
    for r in drain:
        if r["kind"] != "node" or not r["href"].startswith("#node-"):
            continue
        mine = [i for i in incidents if i["node"] == r["target"] and i["provider"] == r["provider"]]
        out.append(
            {
                "anchor": r["href"][1:],
                "node": r["target"],
                "provider": r["provider"],
                "cluster": r["cluster"],
                "incidents": mine,
            }
        )
    return out


def summarise(jobs: pl.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    """Failed jobs grouped by ``keys``: how many, GPU-hours, users, states, top root cause."""
    if jobs.is_empty():
        return []
    g = (
        jobs.group_by(keys)
        .agg(
            pl.len().alias("jobs"),
            pl.col("gpu_hours_lost").sum().alias("gpu_hours_lost"),
            pl.col("user").n_unique().alias("users"),
            pl.col("state").unique().sort().str.join(", ").alias("states"),
            pl.col("root_cause").mode().sort().first().alias("top_cause"),
        )
        .sort(["jobs", "gpu_hours_lost", *keys], descending=[True, True, *[False] * len(keys)])
    )
    return g.to_dicts()


def explain_lemon(row: dict[str, Any]) -> dict[str, Any]:
    """The lemon row with ``tests`` (which tests flagged it), ``why`` (the flag and what its p
    means) and ``short`` (one line for the do-first list)."""
    kinds = [k for k in (row.get("evidence_kind") or "").split("+") if k]
    tests = " and ".join(LEMON_TESTS.get(k, k) for k in kinds) or "a lemon test"
    p = row.get("p_value")
    why = (
        f"Flagged by {tests}: {row.get('reason') or ''}. "
        + (
            f"p = {p:.2g} is the chance of at least this many by luck at the rate of the rest of its cluster; "
            if p is not None
            else ""
        )
        + f"a flag needs p under the Benjamini-Hochberg cut for a {DEFAULT.fdr:.0%} false discovery rate "
        f"over every node (or GPU) tested, and at least {DEFAULT.lemon_min_incidents} incidents "
        f"({DEFAULT.repeat_gpu_fault_incidents} for one GPU)."
    )
    first = (row.get("reason") or "").split("; ")[0]
    return {
        **row,
        "tests": tests,
        "why": why,
        "short": f"{first} ({'+'.join(kinds) or 'flag'}, p = {p:.2g})" if p is not None else first,
        "anchor": f"lemon-{slug(row['provider'])}-{slug(row['cluster'])}-{slug(row['node'])}",
    }


def explain_rack(row: dict[str, Any]) -> dict[str, Any]:
    """The hotspot row with ``why``: the correlation test (nodes failing together) or the rate
    test raised it, and what the expected count and p beside it mean."""
    by = set((row.get("flagged_by") or "").split("+"))
    parts = []
    if "correlation" in by:
        parts.append(
            f"Flagged by the correlation test: {row.get('correlated_incidents') or 0} time(s) "
            f"{DEFAULT.rack_incident_min_nodes} or more of its nodes had a {row.get('correlated_category') or ''} "
            f"incident within {DEFAULT.rack_incident_window_s / 60:.0f} minutes of each other (up to "
            f"{row.get('max_nodes_together') or 0} at once): a shared cause (leaf switch, cable, power) rather than chance."
        )
    exp, p, k = row.get("expected"), row.get("p_value"), row.get("tested_incidents")
    numbers = (
        f"{k} incident(s) its nodes did not share, not counting its worst node (one bad node is no bad rack), "
        f"where {exp:.2f} were expected from the rest of its cluster (p = {p:.2g}: the chance of at least that "
        f"many by luck)"
        if exp is not None and p is not None and k is not None
        else ""
    )
    if "rate" in by:
        parts.append(
            f"Flagged by the rate test: {numbers}; it passed the Benjamini-Hochberg cut for a "
            f"{DEFAULT.fdr:.0%} false discovery rate."
        )
    elif numbers:
        parts.append(f"The rate test did not flag it: {numbers}.")
    short = (
        f"{row.get('correlated_incidents')}x several nodes failed together ({row.get('correlated_category')})"
        if "correlation" in by
        else f"{k} incidents vs {exp:.2f} expected (p = {p:.2g})"
        if exp is not None and p is not None and k is not None
        else row.get("reason") or ""
    )
    return {
        **row,
        "why": " ".join(parts) or (row.get("reason") or ""),
        "short": short,
        "anchor": f"rack-{slug(row['provider'])}-{slug(row['cluster'])}-{slug(row['rack'])}",
    }
