"""``faultline known check|list|show|suggest|apply``: the known-issues registry (docs/known-issues.md)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from pathlib import Path

import click

from ._options import LOCATION, location_option, parse_date
from .sql import open_warehouse, warehouse_option

known_issues_option = click.option(
    "--known-issues",
    "known_issues",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="FAULTLINE_KNOWN_ISSUES",
    help="The known-issues file (YAML). Env: FAULTLINE_KNOWN_ISSUES. "
    "Default: known_issues.yaml in the folder that holds the warehouse, if it exists.",
)


@contextlib.contextmanager
def known_issues_env(path: Path | None):
    """Point the analytics asset (which reads env FAULTLINE_KNOWN_ISSUES) at ``path`` while a
    command runs it in this process; the environment is restored afterwards."""
    from ..analytics.known_issues import ENV

    if path is None:
        yield
        return
    old = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def load_registry(path: Path | None, warehouse) -> object:
    """The registry, or a ClickException naming the file and line of its first mistake."""
    from ..analytics.known_issues import KnownIssuesError, load_for

    try:
        return load_for(path, warehouse)
    except KnownIssuesError as exc:
        raise click.ClickException(str(exc)) from exc


def _s(v, width: int | None = None) -> str:
    from ..report.sanitize import terminal

    return terminal("-" if v is None else v, max_len=width)


def _table_rows(con) -> list[dict]:
    from ..lake.queries import QueryError, run_sql

    try:
        return run_sql(con, "SELECT * FROM known_issues").to_dicts()
    except QueryError:
        return []  # the analytics have not been built with the registry yet


@click.group("known")
def known() -> None:
    """The known-issues registry: failures whose fix is known, with what they cost.

    \b
    check    validate the file (one clear error naming the file and line)
    list     every entry with its status, matches and GPU-hours lost since opened
    show ID  one entry: runbook, hot-fix, ticket, its recent matches
    suggest  entries to paste for recurring failures no entry covers
    apply    recompute the analytics and the report with the current file"""


@known.command("check")
@known_issues_option
@warehouse_option
def known_check(known_issues: Path | None, warehouse):
    """Validate the known-issues file; exit 1 with FILE:LINE: what, on the first mistake."""
    from ..analytics.known_issues import resolve

    where, _required = resolve(known_issues, warehouse)
    reg = load_registry(known_issues, warehouse)
    if reg.path is None:
        click.echo(f"no known-issues file ({where or 'none'} does not exist): nothing to check", err=True)
        return
    drains = sum(k.says_drain() for k in reg.issues)
    overrides = sum(k.overrides for k in reg.issues)
    click.echo(
        f"{reg.path}: {len(reg.issues)} entr{'y' if len(reg.issues) == 1 else 'ies'} OK "
        f"({overrides} with a verdict override, {drains} that say drain; quiet after {reg.quiet_days} days)"
    )


@known.command("list")
@known_issues_option
@warehouse_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def known_list(known_issues: Path | None, warehouse, fmt: str):
    """Every entry: status, matches, jobs and GPU-hours lost since opened, last seen, ticket."""
    reg = load_registry(known_issues, warehouse)
    rows = {}
    stale = False
    try:
        con = open_warehouse(warehouse)
    except click.ClickException:
        con = None
    if con is not None:
        try:
            for r in _table_rows(con):
                rows[r["known_issue_id"]] = r
                stale = stale or (reg.path is not None and r["file_sha256"] != reg.sha256)
        finally:
            con.close()
    out = []
    for k in reg.issues:
        r = rows.get(k.id) or {}
        out.append(
            {
                "id": k.id,
                "title": k.title,
                "status": r.get("status", "not applied yet"),
                "matches_since_opened": r.get("matches_since_opened"),
                "jobs_since_opened": r.get("jobs_since_opened"),
                "gpu_hours_lost_since_opened": r.get("gpu_hours_lost_since_opened"),
                "last_seen": r.get("last_seen"),
                "matches_after_end": r.get("matches_after_end"),
                "ticket": k.ticket,
                "owner": k.owner,
                "opened": k.opened,
                "expires": k.expires,
                "closed": k.closed,
                "drain": k.says_drain(),
                "verdict": k.verdict_text(),
            }
        )
    if fmt == "json":
        click.echo(json.dumps(out, default=str, indent=2))
        return
    if not out:
        click.echo(f"no entries ({reg.path or 'no known-issues file'})")
        return
    click.echo(f"{'id':24} {'status':10} {'matches':>7} {'jobs':>5} {'GPU-h lost':>10} {'last seen':20} ticket / title")
    for r in out:
        h = r["gpu_hours_lost_since_opened"]
        flag = "  (!) still matching after it ended" if r["matches_after_end"] else ""
        click.echo(
            f"{_s(r['id'], 24):24} {_s(r['status'], 10):10} {_s(r['matches_since_opened']):>7} "
            f"{_s(r['jobs_since_opened']):>5} {('-' if h is None else f'{h:,.1f}'):>10} "
            f"{_t(r['last_seen']):20} {_s(r['ticket'], 20)} {_s(r['title'], 80)}{flag}"
        )
    if stale:
        click.echo("note: the warehouse applied another version of the file; run `faultline known apply`", err=True)


def _t(v) -> str:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return "-" if v is None else str(v)


@known.command("show")
@click.argument("issue_id")
@known_issues_option
@warehouse_option
@click.option("--matches", "max_matches", type=click.IntRange(min=0), default=20, show_default=True)
def known_show(issue_id: str, known_issues: Path | None, warehouse, max_matches: int):
    """One entry: what it matches, where, its verdict, runbook, hot-fix, ticket, cost and matches."""
    from ..lake.queries import QueryError, run_sql

    reg = load_registry(known_issues, warehouse)
    k = reg.get(issue_id)
    if k is None:
        ids = ", ".join(x.id for x in reg.issues[:20]) or "none"
        raise click.ClickException(f"no entry {issue_id!r} in {reg.path or 'the known-issues file'} (ids: {ids})")
    from ..analytics.known_matches import describe_match, describe_scope

    lines = [
        click.style(f"{_s(k.id)}: {_s(k.title)}", bold=True),
        f"  file        {_s(reg.path)}:{k.line}",
        f"  match       {_s(describe_match(k))}",
        f"  scope       {_s(describe_scope(k))}",
        f"  verdict     {_s(k.verdict_text() or 'unchanged (the rules decide)')}",
        f"  opened      {k.opened}   expires {k.expires or '-'}   closed {k.closed or '-'}",
        f"  owner       {_s(k.owner)}   ticket {_s(k.ticket)}   drain {'yes' if k.says_drain() else 'no'}",
        f"  runbook     {_s(k.runbook)}",
        f"  hot-fix     {_s(k.hotfix)}   (shown, never run)",
    ]
    if k.notes:
        lines.append(f"  notes       {_s(k.notes, 400)}")
    try:
        con = open_warehouse(warehouse)
    except click.ClickException:
        con = None
    if con is not None:
        try:
            row = run_sql(con, "SELECT * FROM known_issues WHERE known_issue_id = $id", {"id": k.id}).to_dicts()
            matches = run_sql(
                con,
                "SELECT * FROM known_issue_matches WHERE known_issue_id = $id ORDER BY ts DESC LIMIT $n",
                {"id": k.id, "n": max_matches},
            ).to_dicts()
        except QueryError:
            row, matches = [], []
        finally:
            con.close()
        if row:
            r = row[0]
            lines += [
                "",
                f"  status      {_s(r['status'])} on {r['as_of']}",
                f"  since opened {r['matches_since_opened']} match(es): {r['jobs_since_opened']} failed job(s), "
                f"{r['gpu_hours_lost_since_opened']:,.1f} GPU-hours lost; {r['nodes']} node(s) hit in all",
                f"  seen        {_t(r['first_seen'])} -> {_t(r['last_seen'])}",
            ]
            if r["matches_after_end"]:
                lines.append(
                    click.style("  STILL MATCHING", fg="red", bold=True)
                    + f" {r['matches_after_end']} time(s) after it ended (last {_t(r['last_after_end'])}): "
                    "renew it, or reopen the ticket"
                )
        lines += ["", click.style(f"Latest matches ({len(matches)}):", bold=True)]
        for m in matches:
            hours = f", {m['gpu_hours_lost']:,.1f} GPU-h" if m["gpu_hours_lost"] is not None else ""
            lines.append(
                f"  {_t(m['ts'])}  {_s(m['state'], 12):12} {_s(m['kind'], 11):11} {_s(m['node'], 16):16} "
                f"{_s(m['category'], 16):16}{hours}  {_s(m['sample'], 140)}"
            )
    click.echo("\n".join(lines))


@known.command("suggest")
@known_issues_option
@warehouse_option
@click.option("--days", type=click.IntRange(min=1), default=30, show_default=True, help="Look back this many days.")
@click.option(
    "--window",
    "window_days",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="... for a signature recurring within this many days ...",
)
@click.option(
    "--min-count", type=click.IntRange(min=2), default=3, show_default=True, help="... at least this many times."
)
@click.option("--as-of", "as_of", callback=parse_date, help="Last day considered (default: the last covered day).")
def known_suggest(known_issues: Path | None, warehouse, days: int, window_days: int, min_count: int, as_of):
    """Entries to paste into the known-issues file for failures that recur on one node, rack
    or cluster and that no entry covers (YAML on stdout; a verdict is left to you)."""
    from ..analytics.known_suggest import load_subjects, suggest, to_yaml
    from ..lake.queries import QueryError, run_sql

    reg = load_registry(known_issues, warehouse)
    con = open_warehouse(warehouse)
    try:
        if as_of is None:
            as_of = run_sql(con, "SELECT max(date) AS d FROM ingest_audit")["d"][0]
        if not _view_exists(con, "known_issue_matches"):
            raise click.ClickException("the analytics predate the known-issues registry: run `faultline known apply`")
        subjects = load_subjects(con)
        inv = run_sql(con, "SELECT provider, cluster, rack, node FROM inventory_latest")
    except QueryError as exc:
        raise click.ClickException(f"{exc} (run `faultline run` first)") from exc
    finally:
        con.close()
    if as_of is None:
        raise click.ClickException("the warehouse has no ingested days yet: run `faultline run` first")
    found = suggest(subjects, inv, reg, as_of, days=days, window_days=window_days, min_count=min_count)
    click.echo(
        f"# {len(found)} suggestion(s): signatures seen >= {min_count} times within {window_days} days on one "
        f"node, rack or cluster, {as_of - dt.timedelta(days=days - 1)} to {as_of}, that no entry covers.\n"
        "# Paste under `issues:` in the known-issues file, add a verdict, runbook, ticket and owner, then run\n"
        "# `faultline known apply`. Each entry is opened on its first failure: its cost since opened is its cost."
    )
    click.echo(to_yaml(found, reg), nl=False)


def _priced(warehouse) -> bool:
    """Whether the warehouse's analytics carry dollars (they were built with a prices.csv)."""
    import polars as pl

    from ..lake.files import analytics_present, analytics_root

    if "provider_costs" not in analytics_present(warehouse):
        return False
    with (analytics_root(warehouse) / "provider_costs.parquet").open("rb") as fh:
        return pl.read_parquet(fh, columns=["usd_paid"])["usd_paid"].is_not_null().any()


@known.command("apply")
@known_issues_option
@warehouse_option
@location_option("landing", "landing", "The landing folder whose prices.csv the analytics read, as `faultline run`.")
@click.option(
    "--prices",
    type=LOCATION,
    envvar="FAULTLINE_PRICES",
    help="prices.csv for the cost analytics (docs/costs.md). Default: LANDING/prices.csv when it exists. "
    "Env: FAULTLINE_PRICES.",
)
def known_apply(known_issues: Path | None, warehouse, landing, prices):
    """Recompute the analytics with the current file (no re-ingest), then the views and the
    report: what `faultline run` does at its end. A bad file (or prices.csv) changes nothing."""
    import time

    from ..analytics.prices import PricesError, default_location, load_prices
    from ..lake.storage import isdir

    reg = load_registry(known_issues, warehouse)
    if not isdir(warehouse):
        raise click.ClickException(f"no warehouse at {warehouse}: run `faultline run` first")
    price_file = str(prices) if prices else default_location(landing)
    try:
        price_rows = load_prices(price_file, required=prices is not None)
    except PricesError as exc:
        raise click.ClickException(str(exc)) from exc
    if price_rows is None and _priced(warehouse):
        click.echo(
            f"warning: the analytics had prices; no prices.csv at {price_file}, so the recomputed ones have "
            "no dollars (pass --landing or --prices)",
            err=True,
        )
    from ..launch.local import finish

    t0 = time.perf_counter()
    try:
        with known_issues_env(known_issues):
            summary = finish(warehouse, prices=price_file if price_rows is not None else None)
    except Exception as exc:  # noqa: BLE001 - one clear line, the traceback is Dagster's
        raise click.ClickException(f"analytics failed: {type(exc).__name__}: {exc}") from exc
    counts = summary.get("analytics") or {}
    click.echo(
        f"{len(reg.issues)} known issue(s) from {reg.path or 'no file'}: {counts.get('known_issue_matches', 0)} "
        f"match(es); analytics, views and report rebuilt in {time.perf_counter() - t0:.1f}s",
        err=True,
    )


# ------------------------------------------------------------------ faultline explain
def _entry_lines(e: dict) -> list[str]:
    out = [
        click.style("Known issue ", bold=True)
        + f"{_s(e['known_issue_id'])}: {_s(e['title'], 160)} ({_s(e['status'])})",
        f"  ticket      {_s(e['ticket'])}   owner {_s(e['owner'])}   opened {e['opened']}",
        f"  cost        {e['matches_since_opened']} match(es), {e['jobs_since_opened']} failed job(s), "
        f"{e['gpu_hours_lost_since_opened']:,.1f} GPU-hours lost since opened",
        f"  runbook     {_s(e['runbook'], 300)}",
        f"  hot-fix     {_s(e['hotfix'], 300)}   (for a person to run; faultline never runs it)",
    ]
    if e.get("drain"):
        out.append("  drain       the entry says to drain the nodes it hits (`faultline drain-list`)")
    return out


def _view_exists(con, name: str) -> bool:
    from ..lake.queries import run_sql

    return not run_sql(con, "SELECT 1 FROM duckdb_views() WHERE view_name = $n", {"n": name}).is_empty()


def explain_job_known(con, provider: str, cluster: str, job_id: str) -> str:
    """The known issue a failed job carries, the verdict it replaced, its runbook and hot-fix."""
    from ..lake.queries import run_sql

    if not _view_exists(con, "known_issues"):
        return ""
    rows = run_sql(
        con,
        "SELECT f.known_issue_id, f.original_root_cause, f.original_action, f.root_cause, f.action, k.* "
        "EXCLUDE (known_issue_id) FROM job_failures AS f JOIN known_issues AS k USING (known_issue_id) "
        "WHERE f.provider = $p AND f.cluster = $c AND f.job_id = $j",
        {"p": provider, "c": cluster, "j": job_id},
    ).to_dicts()
    if not rows:
        return ""
    e = rows[0]
    out = _entry_lines(e)
    if e["original_root_cause"] is not None:
        out.insert(
            1,
            click.style("  OVERRIDDEN", fg="yellow", bold=True)
            + f"  the rules said {_s(e['original_root_cause'])} ({_s(e['original_action'])}); this entry says "
            f"{_s(e['root_cause'])} ({_s(e['action'])})",
        )
    return "\n".join(out) + "\n"


def explain_node_known(con, provider: str, cluster: str, node: str, since) -> str:
    """The known issues that hit a node in the window, with their runbook and hot-fix."""
    from ..lake.queries import run_sql

    if not _view_exists(con, "known_issues"):
        return ""
    rows = run_sql(
        con,
        "SELECT k.*, count(*) AS hits, max(m.ts) AS last_hit FROM known_issue_matches AS m "
        "JOIN known_issues AS k USING (known_issue_id) WHERE m.provider = $p AND m.cluster = $c AND m.node = $n "
        "AND m.state = 'applied' AND ($since IS NULL OR CAST(timezone('UTC', m.ts) AS DATE) >= $since) "
        "GROUP BY ALL ORDER BY last_hit DESC",
        {"p": provider, "c": cluster, "n": node, "since": since},
    ).to_dicts()
    out = []
    for e in rows:
        out += _entry_lines(e)
        out.append(f"  on this node {e['hits']} time(s) in the window, the last {_t(e['last_hit'])}")
    return "\n".join(out) + ("\n" if out else "")
