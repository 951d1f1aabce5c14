"""``faultline explain job ID`` / ``faultline explain node NAME``: a verdict with its evidence, for a terminal."""

from __future__ import annotations

import datetime as dt
import difflib
from pathlib import Path

import click

from .known import explain_job_known, explain_node_known
from .sql import open_warehouse, warehouse_option

TIMELINE_LINES = 60


def _t(v) -> str:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return "-" if v is None else str(v)


def _n(v, digits: int = 1) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"


def _s(v, width: int | None = None) -> str:
    from ..report.sanitize import terminal

    return terminal("-" if v is None else v, max_len=width)


@click.group("explain")
def explain() -> None:
    """Explain one failed job or one node, with the evidence behind the verdict."""


@explain.command("job")
@click.argument("job_id")
@warehouse_option
@click.option("--provider", help="Only this provider (when the id exists in several clusters).")
@click.option("--cluster", help="Only this cluster.")
@click.option(
    "--lines", "max_lines", type=int, default=TIMELINE_LINES, show_default=True, help="Timeline lines at most."
)
def explain_job(job_id: str, warehouse: Path, provider, cluster, max_lines: int):
    """Why job JOB_ID failed: verdict, impact, evidence, who decided, action, timeline (UTC)."""
    from ..lake.queries import QueryError, run_query, run_sql

    con = open_warehouse(warehouse)
    try:
        where = {"job_id": job_id, "provider": provider, "cluster": cluster}
        verdicts = run_query(con, "job_root_cause", where).to_dicts()
        if not verdicts:
            known = run_sql(
                con,
                'SELECT provider, cluster, state, "end" FROM jobs WHERE job_id = $job '
                "AND ($provider IS NULL OR provider = $provider) "
                "AND ($cluster IS NULL OR cluster = $cluster) ORDER BY date DESC LIMIT 1",
                {"job": job_id, "provider": provider, "cluster": cluster},
            ).to_dicts()
            if known:
                k = known[0]
                click.echo(
                    f"Job {_s(job_id)} on {_s(k['provider'])}/{_s(k['cluster'])} ended {_s(k['state'])} "
                    f"at {_t(k['end'])}: not a failure, nothing to explain."
                )
                return
            raise click.ClickException(
                f"no job {job_id!r} in the warehouse"
                + (f" for {provider or '*'}/{cluster or '*'}" if provider or cluster else "")
            )
        for v in verdicts:
            timeline = run_query(
                con,
                "job_timeline",
                {"job_id": job_id, "provider": v["provider"], "cluster": v["cluster"], "max_lines": max_lines},
            ).to_dicts()
            click.echo(_job_text(v, timeline, explain_job_known(con, v["provider"], v["cluster"], v["job_id"])))
    except QueryError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        con.close()


def _job_text(v: dict, timeline: list[dict], known: str = "") -> str:
    out = [
        click.style(f"Job {_s(v['job_id'])} on {_s(v['provider'])}/{_s(v['cluster'])}", bold=True)
        + f": {_s(v['job_name'], 80)} (user {_s(v['user'], 40)})",
        f"  state       {_s(v['state'])} (exit code {_s(v['exit_code'])}, signal {_s(v['signal'])})",
        f"  ran         {_t(v['started'])} -> {_t(v['ended'])}",
        f"  impact      {_n(v['nodes'])} node(s) {_s(v['node_list'])}, {_n(v['gpus'])} GPU(s), "
        f"{_n(v['gpu_hours_lost'])} GPU-hours lost",
        "",
        click.style("Verdict: ", bold=True)
        + f"{_s(v['root_cause'])} ({_s(v['domain'])})"
        + (f", culprit {_s(v['culprit_node'])}" if v["culprit_node"] else ", no culprit node")
        + (f" GPU {_s(v['culprit_gpu'])}" if v["culprit_gpu"] else "")
        + f", confidence {_n(v['confidence'], 2)}",
        f"  decided by  {_s(v['decided_by'])}",
        f"  action      {_s(v['action'])}",
    ]
    if v.get("fr_suspect_rank") is not None:
        out.append(f"  flight rec. rank {v['fr_suspect_rank']} lags: {_s(v['fr_suspect_reason'])}")
    if v.get("job_log_categories"):
        out.append(f"  job log     also saw: {', '.join(_s(c) for c in v['job_log_categories'])}")
    if known:  # the known issue it carries, next to the verdict
        out += ["", *known.rstrip("\n").split("\n")]
    out += ["", click.style("Evidence:", bold=True)]
    out += [f"  {_s(line)}" for line in (v["evidence"] or "-").splitlines()[:6]]
    out += ["", click.style("Timeline (UTC):", bold=True) + "  (* = the deciding line)"]
    for t in timeline:
        mark = "*" if t["deciding"] else " "
        count = f" (x{t['count']})" if t["count"] and t["count"] > 1 else ""
        out.append(
            f" {mark}{_t(t['ts']):21} {t['origin']:9} {_s(t['node'] or '', 14):14} "
            f"{_s(t['category'], 18):18} {_s(t['line'], 160)}{count}"
        )
    if not timeline:
        out.append("  (no log lines found for this job)")
    return "\n".join(out) + "\n"


@explain.command("node")
@click.argument("name")
@warehouse_option
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="Incidents, failed jobs and timeline of the last N covered days.",
)
@click.option(
    "--lines", "max_lines", type=int, default=TIMELINE_LINES, show_default=True, help="Timeline lines at most."
)
def explain_node(name: str, warehouse: Path, days: int, max_lines: int):
    """How node NAME is doing: its rate vs its cluster (95% CI), lemon status, incidents, failed jobs, timeline."""
    from ..lake.queries import QueryError, run_query, run_sql

    con = open_warehouse(warehouse)
    try:
        inv = run_sql(con, "SELECT * FROM inventory_latest WHERE node = $node", {"node": name}).to_dicts()
        if not inv:
            names = run_sql(con, "SELECT DISTINCT node FROM inventory_latest")["node"].to_list()
            close = difflib.get_close_matches(name, [n for n in names if n], n=3, cutoff=0.6)
            raise click.ClickException(
                f"no node {name!r} in the inventory" + (f"; did you mean {' or '.join(close)}?" if close else "")
            )
        last = run_sql(con, "SELECT max(date) AS d FROM ingest_audit")["d"][0]
        since = last - dt.timedelta(days=days - 1) if last else None
        for node in inv:
            key = {"node": name, "provider": node["provider"], "cluster": node["cluster"]}
            health = run_sql(
                con, "SELECT * FROM node_health WHERE node = $node AND provider = $provider AND cluster = $cluster", key
            ).to_dicts()
            cl = run_sql(
                con,
                "SELECT * FROM provider_scoreboard WHERE level = 'cluster' AND provider = $provider "
                "AND cluster = $cluster",
                {"provider": node["provider"], "cluster": node["cluster"]},
            ).to_dicts()
            lemon = run_sql(
                con, "SELECT * FROM lemon_nodes WHERE node = $node AND provider = $provider AND cluster = $cluster", key
            ).to_dicts()
            window = {**key, "since": since}
            incidents = run_sql(
                con,
                "SELECT * FROM counted_incidents WHERE node = $node AND provider = $provider "
                "AND cluster = $cluster AND day >= $since ORDER BY first_ts",
                window,
            ).to_dicts()
            notices = run_sql(
                con,
                "SELECT category, severity, count(*) AS n FROM incidents WHERE node = $node "
                "AND provider = $provider AND cluster = $cluster AND severity NOT IN ('error', 'critical') "
                "AND CAST(timezone('UTC', first_ts) AS DATE) >= $since GROUP BY ALL ORDER BY n DESC, category",
                window,
            ).to_dicts()
            counted = run_sql(
                con,
                "SELECT * FROM node_failures WHERE node = $node AND provider = $provider "
                "AND cluster = $cluster AND day >= $since ORDER BY ts",
                window,
            ).to_dicts()
            blamed = run_sql(
                con,
                "SELECT * FROM counted_failed_jobs WHERE culprit_node = $node AND provider = $provider "
                "AND cluster = $cluster AND infrastructure AND day >= $since ORDER BY ended",
                window,
            ).to_dicts()
            timeline = run_query(con, "node_timeline", {**key, "since": since, "max_rows": max_lines}).to_dicts()
            click.echo(
                _node_text(
                    node,
                    health[0] if health else None,
                    cl[0] if cl else None,
                    lemon[0] if lemon else None,
                    incidents,
                    notices,
                    counted,
                    blamed,
                    timeline,
                    days,
                    since,
                    last,
                )
            )
            click.echo(explain_node_known(con, node["provider"], node["cluster"], name, since), nl=False)
    except QueryError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        con.close()


def _node_text(node, health, cluster, lemon, incidents, notices, counted, blamed, timeline, days, since, last) -> str:
    where = f"{_s(node['provider'])}/{_s(node['cluster'])}"
    out = [
        click.style(f"Node {_s(node['node'])}", bold=True)
        + f" on {where}, rack {_s(node['rack'])}, {_n(node['gpus'])} x {_s(node['gpu_model'])}"
    ]
    if health:
        out.append(
            f"  rate        {_n(health['rate_per_1k'])} failures per 1,000 node-days "
            f"(95% CI {_n(health['ci_low'])} to {_n(health['ci_high'])}) over every covered day: "
            f"{health['failures']} failure(s) ({health['incidents']} incident(s) its rack does not share + "
            f"{health['interruptions']} interruption(s)) in {_n(health['node_days'], 0)} node-day(s)"
        )
    else:
        out.append("  rate        - (no covered node-days)")
    if cluster:
        out.append(
            f"  cluster     {_n(cluster['rate_per_1k'])} (95% CI {_n(cluster['ci_low'])} to {_n(cluster['ci_high'])}) "
            f"over {cluster['n_nodes']} node(s)"
        )
        if health and health["ci_low"] is not None and cluster["rate_per_1k"] is not None:
            if health["ci_low"] > cluster["rate_per_1k"]:
                out.append(
                    "              this node fails more than its cluster (its interval lies above the cluster rate)"
                )
            elif health["ci_high"] < cluster["rate_per_1k"]:
                out.append("              this node fails less than its cluster")
            else:
                out.append(
                    "              not distinguishable from its cluster yet (the cluster rate is inside its interval)"
                )
    if lemon:
        out.append(
            click.style("  LEMON", fg="red", bold=True)
            + f"       {_s(lemon['reason'])} ({_s(lemon['evidence_kind'])}); recommended action: {_s(lemon['action'])}"
        )
    else:
        out.append("  lemon       no")
    shared = sum(1 for i in incidents if i["rack_shared"])
    out += [
        "",
        click.style(f"Incidents in the last {days} day(s) ({since} to {last}): {len(incidents)}", bold=True)
        + f"  (severity error or critical; {shared} shared with rack-mates)",
    ]
    for i in incidents:
        rack = f" [rack incident, {i['rack_nodes']} nodes]" if i["rack_shared"] else ""
        out.append(
            f"  {_t(i['first_ts'])}  {_s(i['category'], 18):18} {_s(i['severity'], 8):8} "
            f"{i['n_events']} event(s), action {_s(i['action'])}{rack}: {_s(i['sample'], 140)}"
        )
    if notices:
        what = ", ".join(f"{n['n']} {_s(n['category'])} ({_s(n['severity'])})" for n in notices)
        out.append(f"  not counted (info/warning): {what}")
    n_inc = sum(1 for c in counted if c["kind"] == "incident")
    out += [
        "",
        click.style(f"Node failures in the last {days} day(s): {len(counted)}", bold=True)
        + f"  (what the rate counts: {n_inc} incident(s) its rack does not share + "
        f"{len(counted) - n_inc} interruption(s))",
    ]
    out += [
        "",
        click.style(f"Infrastructure failures blamed on it in the last {days} day(s): {len(blamed)}", bold=True),
    ]
    for j in blamed:
        out.append(
            f"  {_t(j['ended'])}  job {_s(j['job_id'])} ({_s(j['job_name'], 40)}, {_s(j['user'], 20)}) "
            f"{_s(j['root_cause'])}, {_n(j['gpu_hours_lost'])} GPU-h lost, confidence {_n(j['confidence'], 2)}"
        )
    out += ["", click.style("Timeline (UTC):", bold=True)]
    for t in timeline:
        out.append(
            f"  {_t(t['ts']):21} {_s(t['kind'], 8):8} {_s(t['category'] or '', 18):18} "
            f"{_s(t['severity'] or '', 8):8} {_s(t['detail'], 160)}"
        )
    if not timeline:
        out.append("  (nothing on this node in the window)")
    return "\n".join(out) + "\n"
