"""The provider ticket / RMA evidence pack for one node (docs/known-issues.md): its place, GPUs,
deciding lines, incidents, interrupted jobs, peer blame, timeline and known issue, as Markdown
to paste into a provider portal (log text escaped) or JSON."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import duckdb
import polars as pl

from ..lake.queries import QueryError, run_query, run_sql
from .headline import headline
from .sanitize import md_escape

TIMELINE_ROWS = 80
INFRA_DOMAINS = ("hardware", "software")
MAX_LINES = 40
#: the token after words that name a peer in NCCL, socket and IB errors (a host or address)
PEER = r"(?:\bpeer|remoteGid ::ffff:|\bCall to \w+ (?:from|to)|\bConnect to)\s*([A-Za-z0-9][A-Za-z0-9.:_-]*[A-Za-z0-9])"
#: a node's own address, from its own lines (IB GIDs, NCCL's bootstrap and OOB interfaces)
OWN_ADDRESS = r"(?:localGid ::ffff:|Bootstrap : Using \w+:|OOB \w+:)(\d{1,3}(?:\.\d{1,3}){3})"


class TicketError(ValueError):
    """The node is not in the warehouse (or is ambiguous)."""


def _one(con, sql: str, params: dict) -> dict | None:
    rows = run_sql(con, sql, params).to_dicts()
    return rows[0] if rows else None


def _table(con, sql: str, params: dict) -> pl.DataFrame | None:
    try:
        return run_sql(con, sql, params)
    except QueryError:
        return None  # a table the analytics have not written yet


def gather(
    con: duckdb.DuckDBPyConnection,
    node: str,
    since: dt.date | None = None,
    provider: str | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """Everything the pack holds, as plain values (datetimes in UTC)."""
    where = {"node": node, "provider": provider, "cluster": cluster}
    inv = run_sql(
        con,
        "SELECT * FROM inventory_latest WHERE node = $node AND ($provider IS NULL OR provider = $provider) "
        "AND ($cluster IS NULL OR cluster = $cluster) ORDER BY provider, cluster",
        where,
    ).to_dicts()
    if not inv:
        raise TicketError(f"no node {node!r} in the inventory")
    if len(inv) > 1:
        places = ", ".join(f"{r['provider']}/{r['cluster']}" for r in inv)
        raise TicketError(f"node {node!r} is in several clusters ({places}): pass --provider and --cluster")
    n = inv[0]
    key = {"node": node, "provider": n["provider"], "cluster": n["cluster"]}
    until = run_sql(con, "SELECT max(date) AS d FROM ingest_audit")["d"][0]
    if since is None:
        since = until - dt.timedelta(days=29) if until else None
    win = {**key, "since": since}
    incidents = run_sql(
        con,
        "SELECT * FROM incidents WHERE node = $node AND provider = $provider AND cluster = $cluster "
        "AND CAST(timezone('UTC', first_ts) AS DATE) >= $since ORDER BY first_ts",
        win,
    ).to_dicts()
    blamed = run_sql(
        con,
        "SELECT * FROM job_failures WHERE culprit_node = $node AND provider = $provider AND cluster = $cluster "
        "AND CAST(timezone('UTC', ended) AS DATE) >= $since ORDER BY ended",
        win,
    ).to_dicts()
    jobs = [j for j in blamed if j["domain"] in INFRA_DOMAINS]  # the infrastructure killed these
    gpus = _gpus(con, key, {i["gpu_pci"] for i in incidents} | {j["culprit_gpu"] for j in jobs})
    driver = _one(
        con,
        "SELECT ts, message FROM events WHERE node = $node AND provider = $provider AND cluster = $cluster "
        "AND rule_id = 'nvrm_loading' ORDER BY ts DESC NULLS LAST LIMIT 1",
        key,
    )
    deciding = [
        {"ts": i["first_ts"], "what": f"incident {i['category']} ({i['severity']})", "line": headline(i["sample"])}
        for i in incidents
    ]
    seen = {d["line"] for d in deciding}
    for j in jobs:  # a job's deciding line, unless it is an incident's line already
        stamp, line = _evidence(j["evidence"])
        if line not in seen:
            seen.add(line)
            deciding.append({"ts": stamp or j["ended"], "what": f"job {j['job_id']} {j['root_cause']}", "line": line})
    deciding.sort(key=lambda d: (d["ts"] is None, d["ts"] or dt.datetime.min.replace(tzinfo=dt.timezone.utc)))
    known = _known(con, key, since)
    timeline = run_query(con, "node_timeline", {**key, "since": since, "max_rows": TIMELINE_ROWS}).to_dicts()
    return {
        "node": node,
        "provider": n["provider"],
        "cluster": n["cluster"],
        "rack": n["rack"],
        "leaf_switch": n.get("leaf_switch"),
        "gpu_model": n.get("gpu_model"),
        "gpus_in_node": n.get("gpus"),
        "driver": _driver(driver),
        "since": since,
        "until": until,
        "gpus": gpus,
        "incidents": [
            {
                k: i[k]
                for k in (
                    "incident_id",
                    "first_ts",
                    "last_ts",
                    "category",
                    "severity",
                    "action",
                    "gpu_pci",
                    "xids",
                    "sxids",
                    "n_events",
                    "rack_incident_id",
                    "known_issue_id",
                )
                if k in i
            }
            for i in incidents
        ],
        "jobs": [
            {
                k: j[k]
                for k in (
                    "job_id",
                    "started",
                    "ended",
                    "state",
                    "nodes",
                    "gpus",
                    "gpu_hours_lost",
                    "root_cause",
                    "culprit_gpu",
                    "confidence",
                    "decided_by",
                    "known_issue_id",
                )
                if k in j
            }
            for j in jobs
        ],
        "gpu_hours_lost": round(sum(j["gpu_hours_lost"] or 0.0 for j in jobs), 3),
        "other_failed_jobs": len(blamed) - len(jobs),
        "deciding_lines": deciding[:MAX_LINES],
        "peer_blame": peer_blame(con, key, since),
        "known_issues": known,
        "timeline": timeline,
    }


_EVIDENCE = re.compile(
    r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\] \S+ (.*?)(?: \(\+\d+ watchdog timeout line.*)?(?:; culprit by \w+)?$"
)


def _evidence(text: str | None) -> tuple[dt.datetime | None, str]:
    """A job's evidence as (the deciding line's time, the line), without the time and node
    faultline put in front and the watchdog counts it put after."""
    first, _, rest = (text or "").partition("\n")
    m = _EVIDENCE.match(first)
    if not m:
        return None, headline(text)
    line = headline(f"{m.group(2)}\n{rest}" if rest else m.group(2))
    return dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc), line


def _driver(row: dict | None) -> str | None:
    if not row:
        return None
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", row["message"] or "")
    return m.group(1) if m else None


def _gpus(con, key: dict, involved: set) -> list[dict]:
    """Every GPU the node's driver named (PCI slot, UUID, board serial), the involved ones first.
    A serial line follows its GPU's identity line, so each serial goes to the identity line before it."""
    ident = run_sql(
        con,
        "SELECT source, line_no, ts, gpu_pci, gpu_uuid, gpu_serial FROM events WHERE node = $node "
        "AND provider = $provider AND cluster = $cluster AND gpu_pci IS NOT NULL "
        "AND (rule_id = 'nvrm_gpu_identity' OR gpu_uuid IS NOT NULL)",
        key,
    )
    serial = run_sql(
        con,
        "SELECT source, line_no, gpu_serial FROM events WHERE node = $node AND provider = $provider "
        "AND cluster = $cluster AND rule_id = 'nvrm_gpu_serial'",
        key,
    )
    involved = {g for g in involved if g}
    # an identity header joined to its Xid carries the serial on the event itself
    parts = [ident.select("gpu_pci", "ts", "gpu_serial")]
    if ident.height and serial.height:
        paired = serial.sort("source", "line_no").join_asof(
            ident.sort("source", "line_no").select("source", "line_no", "gpu_pci", "ts"),
            on="line_no",
            by="source",
            strategy="backward",
            check_sortedness=False,
        )
        parts.append(paired.select("gpu_pci", "ts", "gpu_serial"))
    serials = (
        pl.concat(parts)
        .filter(pl.col("gpu_pci").is_not_null() & (pl.col("gpu_serial").fill_null("") != ""))
        .sort("ts", nulls_last=False)
        .group_by("gpu_pci", maintain_order=True)
        .agg(pl.col("gpu_serial").unique(maintain_order=True))
    )
    uuids = (
        ident.sort("ts", nulls_last=False)
        .group_by("gpu_pci", maintain_order=True)
        .agg(pl.col("gpu_uuid").drop_nulls().unique(maintain_order=True))
    )
    known = uuids.join(serials, on="gpu_pci", how="full", coalesce=True)
    rows = {r["gpu_pci"]: r for r in known.to_dicts()}
    for pci in involved - set(rows):
        rows[pci] = {"gpu_pci": pci, "gpu_uuid": [], "gpu_serial": []}
    out = [
        {
            "pci_slot": pci,
            "uuids": list(r.get("gpu_uuid") or []),
            "serials": list(r.get("gpu_serial") or []),
            "involved": pci in involved,
        }
        for pci, r in rows.items()
    ]
    return sorted(out, key=lambda g: (not g["involved"], g["pci_slot"]))


def addresses(con, key: dict) -> list[str]:
    """The node's own IP addresses, from its own lines."""
    df = run_sql(
        con,
        "SELECT DISTINCT regexp_extract(message, $re, 1) AS ip FROM events WHERE node = $node "
        "AND provider = $provider AND cluster = $cluster AND regexp_matches(message, $re)",
        {**key, "re": OWN_ADDRESS},
    )
    return sorted(v for v in df["ip"].to_list() if v)


def peer_blame(con, key: dict, since: dt.date | None) -> dict[str, Any]:
    """How often other nodes' errors named this node or one of its addresses as their peer (lines
    that do not say which node printed them, such as a Python exception quoting NCCL, do not count)."""
    ips = addresses(con, key)
    df = run_sql(
        con,
        "SELECT node, job_id, rule_id, category, ts, split_part(raw, chr(10), 1) AS line, "
        "regexp_extract_all(message, $re, 1) AS peers FROM events "
        "WHERE provider = $provider AND cluster = $cluster AND node IS NOT NULL AND node <> $node "
        "AND category NOT IN ('benign') AND ($since IS NULL OR date >= $since) AND regexp_matches(message, $re)",
        {**key, "re": PEER, "since": since},
    )
    name = key["node"]
    if df.height:
        tok = pl.element()
        short = tok.str.split(".").list.first()
        names_it = (short == name) | (short == f"{name}-ib") | tok.is_in(ips or [""])
        df = df.filter(pl.col("peers").list.eval(names_it).list.any())
    by_rule = (
        df.group_by("rule_id", "category")
        .agg(pl.len().alias("lines"))
        .sort("lines", "rule_id", descending=[True, False])
        if df.height
        else pl.DataFrame()
    )
    return {
        "addresses": ips,
        "lines": df.height,
        "nodes": df["node"].drop_nulls().n_unique() if df.height else 0,
        "jobs": df["job_id"].drop_nulls().n_unique() if df.height else 0,
        "by_rule": by_rule.to_dicts() if df.height else [],
        "examples": df.sort("ts", nulls_last=True).head(5).select("ts", "node", "job_id", "line").to_dicts()
        if df.height
        else [],
    }


def _known(con, key: dict, since) -> list[dict]:
    df = _table(
        con,
        "SELECT k.known_issue_id, k.title, k.status, k.ticket, k.owner, k.runbook, k.hotfix, "
        "count(*) AS matches, max(m.ts) AS last_seen FROM known_issue_matches AS m "
        "JOIN known_issues AS k USING (known_issue_id) WHERE m.node = $node AND m.provider = $provider "
        "AND m.cluster = $cluster AND m.state = 'applied' AND ($since IS NULL OR CAST(timezone('UTC', m.ts) AS DATE) >= $since) "
        "GROUP BY ALL ORDER BY last_seen DESC",
        {**key, "since": since},
    )
    return df.to_dicts() if df is not None else []


# ---------------------------------------------------------------------------- rendering
def _t(v) -> str:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return "\u2014" if v is None else str(v)


def _e(v, n: int | None = None) -> str:
    return "\u2014" if v is None or v == "" else md_escape(v, max_len=n)


def _h(v) -> str:
    return "\u2014" if v is None else f"{v:,.1f}"


def markdown(p: dict[str, Any]) -> str:
    """The pack as Markdown: every value that came from logs or names passes ``md_escape``."""
    out = [
        f"## Node {_e(p['node'])}: evidence for {_e(p['provider'])}",
        "",
        f"{_e(p['provider'])} / {_e(p['cluster'])}, rack {_e(p['rack'])}, leaf switch {_e(p['leaf_switch'])}; "
        f"{_e(p['gpus_in_node'])} x {_e(p['gpu_model'])}, driver {_e(p['driver'])}. "
        f"Window {_e(p['since'])} to {_e(p['until'])} (UTC).",
        "",
        f"**{len(p['incidents'])} incident(s); {len(p['jobs'])} job(s) interrupted by a hardware or driver fault, "
        f"{_h(p['gpu_hours_lost'])} GPU-hours lost; other nodes' errors named it {p['peer_blame']['lines']} time(s)"
        f" (from {p['peer_blame']['nodes']} node(s)).**",
    ]
    for k in p["known_issues"]:
        out += [
            "",
            f"Known issue {_e(k['known_issue_id'])} ({_e(k['status'])}): {_e(k['title'], 200)}; "
            f"our ticket with you: **{_e(k['ticket'])}**; {k['matches']} match(es) on this node, last {_t(k['last_seen'])}.",
        ]
    out += ["", "### GPUs", "", "| PCI slot | UUID | board serial | involved |", "| --- | --- | --- | --- |"]
    for g in p["gpus"]:
        out.append(
            f"| {_e(g['pci_slot'])} | {_e(', '.join(g['uuids']))} | {_e(', '.join(g['serials']))} | "
            f"{'yes' if g['involved'] else ''} |"
        )
    if not p["gpus"]:
        out.append("| \u2014 | the logs name no GPU identity | | |")
    out += ["", "### Deciding lines (UTC, verbatim from the logs)", ""]
    for d in p["deciding_lines"]:
        out.append(f"- {_t(d['ts'])} {_e(d['what'])}: {_e(d['line'], 400)}")
    if not p["deciding_lines"]:
        out.append("- none in the window")
    out += [
        "",
        "### Incidents",
        "",
        "| first (UTC) | last (UTC) | category | severity | GPU | Xid | events | rack-wide | known issue |",
        "| --- | --- | --- | --- | --- | --- | ---: | --- | --- |",
    ]
    for i in p["incidents"]:
        xids = ", ".join(str(x) for x in (i.get("xids") or []))
        out.append(
            f"| {_t(i['first_ts'])} | {_t(i['last_ts'])} | {_e(i['category'])} | {_e(i['severity'])} | "
            f"{_e(i['gpu_pci'])} | {_e(xids)} | {i['n_events']} | {'yes' if i.get('rack_incident_id') else ''} | "
            f"{_e(i.get('known_issue_id'))} |"
        )
    out += [
        "",
        "### Jobs interrupted",
        "",
        f"Jobs whose root cause is a hardware or driver fault on this node ({p['other_failed_jobs']} other failed "
        "job(s) that ended on it were blamed on user code or the scheduler).",
        "",
        "| job | started (UTC) | ended (UTC) | state | nodes | GPUs | GPU-hours lost | root cause | GPU |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for j in p["jobs"]:
        out.append(
            f"| {_e(j['job_id'])} | {_t(j['started'])} | {_t(j['ended'])} | {_e(j['state'])} | {j['nodes']} | "
            f"{j['gpus']} | {_h(j['gpu_hours_lost'])} | {_e(j['root_cause'])} | {_e(j['culprit_gpu'])} |"
        )
    b = p["peer_blame"]
    out += [
        "",
        "### Named by other nodes",
        "",
        f"Addresses of this node seen in its own lines: {_e(', '.join(b['addresses']) or None)}. "
        f"{b['lines']} error line(s) on {b['nodes']} other node(s), in {b['jobs']} job(s), named it as their peer.",
    ]
    if b["by_rule"]:
        out += ["", "| rule | category | lines |", "| --- | --- | ---: |"]
        out += [f"| {_e(r['rule_id'])} | {_e(r['category'])} | {r['lines']} |" for r in b["by_rule"]]
        out += [""]
        out += [f"- {_t(x['ts'])} {_e(x['node'])}: {_e(x['line'], 300)}" for x in b["examples"]]
    out += ["", "### Timeline (UTC)", ""]
    for t in p["timeline"]:
        out.append(f"- {_t(t['ts'])} {_e(t['kind'])} {_e(t['category'])} {_e(t['severity'])}: {_e(t['detail'], 300)}")
    if not p["timeline"]:
        out.append("- nothing in the window")
    return "\n".join(out) + "\n"


def to_json(p: dict[str, Any]) -> str:
    """The pack as JSON (datetimes as ISO-8601 UTC; non-ASCII and controls escaped)."""

    def default(v):
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
        if isinstance(v, dt.date):
            return v.isoformat()
        return str(v)

    return json.dumps(p, default=default, indent=2, ensure_ascii=True) + "\n"
