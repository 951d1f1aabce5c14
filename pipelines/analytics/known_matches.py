"""Apply the known-issues registry to incidents and job failures: tag each with the first entry
(in file order) that matches it, apply that entry's verdict override, and count per entry what
it matched and cost (the ``known_issue_matches`` and ``known_issues`` tables)."""

from __future__ import annotations

import datetime as dt

import polars as pl

from .known_issues import EMPTY, KnownIssue, Registry

#: the rule that keeps the driver's load banner: a node's driver version and its (re)boots
DRIVER_RULE = "nvrm_loading"
_DRIVER_VERSION = r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)"
_TS = "%Y-%m-%dT%H:%M:%SZ"
UTC = pl.Datetime("us", "UTC")

MATCH_STATES = ("applied", "shadowed", "after_expiry", "after_close")


def driver_loads(events: pl.DataFrame) -> pl.DataFrame:
    """Every driver load seen (provider, cluster, node, ts, driver), in time order."""
    cols = {"provider": pl.String, "cluster": pl.String, "node": pl.String, "ts": UTC, "driver": pl.String}
    if "rule_id" not in events.columns:
        return pl.DataFrame(schema=cols)
    return (
        events.filter((pl.col("rule_id") == DRIVER_RULE) & pl.col("node").is_not_null() & pl.col("ts").is_not_null())
        .select("provider", "cluster", "node", "ts", driver=pl.col("message").str.extract(_DRIVER_VERSION, 1))
        .sort("provider", "cluster", "node", "ts")
    )


def _with_driver(subj: pl.DataFrame, loads: pl.DataFrame) -> pl.DataFrame:
    """The node's driver at the subject's time: its last load before, else its first after."""
    by = ["provider", "cluster", "node"]
    if loads.is_empty():
        return subj.with_columns(driver=pl.lit(None, pl.String))
    loads = loads.filter(pl.col("driver").is_not_null()).select(*by, pl.col("ts").alias("_lt"), "driver")
    s = subj.with_row_index("_s").sort("ts")
    back = s.join_asof(
        loads.sort("_lt"), left_on="ts", right_on="_lt", by=by, strategy="backward", check_sortedness=False
    )
    fwd = s.join_asof(
        loads.sort("_lt"), left_on="ts", right_on="_lt", by=by, strategy="forward", check_sortedness=False
    )
    out = back.with_columns(driver=pl.coalesce(back["driver"], fwd["driver"])).sort("_s")
    return out.drop("_s", "_lt")


def _node_attrs(inventory: pl.DataFrame) -> pl.DataFrame:
    cols = ["provider", "cluster", "node", "rack", "gpu_model"]
    inv = inventory
    for c in ("rack", "gpu_model"):
        if c not in inv.columns:
            inv = inv.with_columns(pl.lit(None, pl.String).alias(c))
    return inv.select(cols).unique(["provider", "cluster", "node"], keep="first")


def incident_subjects(incidents: pl.DataFrame, events: pl.DataFrame, inventory: pl.DataFrame) -> pl.DataFrame:
    """What the registry matches an incident on: its deciding event's rule, template and message,
    its rules, category, Xid/SXid codes, and where and when it happened."""
    ev = events.select(
        pl.col("event_id").alias("first_event_id"),
        pl.col("template").alias("signature"),
        "message",
    ).unique("first_event_id", keep="first")
    inv = _node_attrs(inventory).select("provider", "cluster", "node", "gpu_model")
    return (
        incidents.select(
            pl.lit("incident").alias("kind"),
            pl.col("incident_id").alias("ref"),
            "provider",
            "cluster",
            "rack",
            "node",
            pl.lit(None, pl.String).alias("job_id"),
            pl.col("first_ts").alias("ts"),
            "rule_ids",
            "category",
            "severity",
            "xids",
            "sxids",
            "first_event_id",
            pl.lit(None, pl.Float64).alias("gpu_hours_lost"),
            pl.col("sample").str.split("\n").list.first().alias("sample"),
        )
        .join(ev, on="first_event_id", how="left")
        .join(inv, on=["provider", "cluster", "node"], how="left")
    )


def deciding_events(failures: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Each failed job's deciding event (provider, cluster, job_id, event_id, template, message,
    xid, sxid): the first of its ``evidence_events``, else (tables written before that column)
    found again from its ``decided_by`` rule and ``evidence`` line."""
    key = ["provider", "cluster", "job_id"]
    out_schema = {
        "provider": pl.String,
        "cluster": pl.String,
        "job_id": pl.String,
        "_rule": pl.String,
        "event_id": pl.String,
        "template": pl.String,
        "message": pl.String,
        "xid": pl.Int32,
        "sxid": pl.Int32,
        "ev_ts": UTC,
    }
    if events.is_empty():
        return pl.DataFrame(schema=out_schema)
    by_id = pl.DataFrame(schema=out_schema)
    if "evidence_events" in failures.columns:
        ids = failures.select(
            *key,
            event_id=pl.col("evidence_events").list.first(),
            _rule=pl.coalesce(
                pl.col("decided_by").str.extract(r"^(?:node|job):([^+\s]+)", 1),
                pl.col("decided_by").str.extract(r"^([^:+\s]+)\+", 1),
            ),
        ).filter(pl.col("event_id").is_not_null())
        by_id = ids.join(
            events.select(
                "provider", "cluster", "event_id", "template", "message", "xid", "sxid", pl.col("ts").alias("ev_ts")
            ).unique(["provider", "cluster", "event_id"], keep="first"),
            on=["provider", "cluster", "event_id"],
            how="inner",
        ).select(list(out_schema))
        failures = failures.join(by_id.select(key), on=key, how="anti")
    f = failures.select(
        *key,
        _rule=pl.coalesce(
            pl.col("decided_by").str.extract(r"^(?:node|job):([^+\s]+)", 1),
            pl.col("decided_by").str.extract(r"^([^:+\s]+)\+", 1),
        ),
        _tss=pl.col("evidence").str.extract(r"^\[(\S+)\] ", 1),
        _node=pl.col("evidence").str.extract(r"^\[\S+\] (\S+) ", 1),
        _line=pl.col("evidence").str.replace(r"^\[\S+\] \S+ ", ""),
        _end=pl.col("ended").dt.strftime(_TS),
    ).filter(pl.col("_rule").is_not_null())
    if f.is_empty():
        return by_id.sort(key)
    ev = events.filter(pl.col("rule_id").is_in(f["_rule"].unique().to_list())).select(
        "provider",
        "cluster",
        "event_id",
        "template",
        "message",
        "xid",
        "sxid",
        pl.col("ts").alias("ev_ts"),
        pl.col("job_id").alias("_ev_job"),
        _rule=pl.col("rule_id"),
        _tss=pl.col("ts").dt.strftime(_TS),
        _node=pl.col("node").fill_null("?"),
        _first=pl.col("raw").str.split("\n").list.first().str.slice(0, 300),
    )
    # a stamped line is found by its time; an unstamped job line counts at the job's end
    by_time = f.join(ev, on=["provider", "cluster", "_rule", "_tss", "_node"], how="inner")
    by_job = f.join(
        ev.filter(pl.col("_tss").is_null()).drop("_tss", "_node"),
        left_on=["provider", "cluster", "_rule", "job_id"],
        right_on=["provider", "cluster", "_rule", "_ev_job"],
        how="inner",
    ).filter(pl.col("_tss") == pl.col("_end"))
    cand = pl.concat([by_time.select(*out_schema, "_line", "_first"), by_job.select(*out_schema, "_line", "_first")])
    by_text = (
        cand.filter(pl.col("_line").str.starts_with(pl.col("_first")))
        .sort([*key, "event_id"])
        .group_by(key, maintain_order=True)
        .first()
        .select(list(out_schema))
    )
    return pl.concat([by_id, by_text]).sort(key)


def job_subjects(failures: pl.DataFrame, events: pl.DataFrame, inventory: pl.DataFrame) -> pl.DataFrame:
    """What the registry matches a failed job on: its deciding event (else its ``decided_by``
    rule and evidence line), its root cause, and its culprit node's place."""
    key = ["provider", "cluster", "job_id"]
    dec = deciding_events(failures, events)
    inv = _node_attrs(inventory).rename({"node": "culprit_node"})
    return (
        failures.join(dec, on=key, how="left")
        .join(inv, on=["provider", "cluster", "culprit_node"], how="left")
        .select(
            pl.lit("job_failure").alias("kind"),
            pl.format("{}/{}/{}", "provider", "cluster", "job_id").alias("ref"),
            "provider",
            "cluster",
            "rack",
            pl.col("culprit_node").alias("node"),
            "job_id",
            pl.coalesce("ev_ts", "ended").alias("ts"),
            pl.concat_list(
                pl.coalesce(
                    "_rule",
                    pl.col("decided_by").str.extract(r"^(?:node|job):([^+\s]+)", 1),
                    pl.col("decided_by").str.extract(r"^([^:+\s]+)\+", 1),
                )
            )
            .list.drop_nulls()
            .alias("rule_ids"),
            pl.col("root_cause").alias("category"),
            pl.lit(None, pl.String).alias("severity"),
            pl.concat_list(pl.col("xid")).list.drop_nulls().alias("xids"),
            pl.concat_list(pl.col("sxid")).list.drop_nulls().alias("sxids"),
            pl.col("event_id").alias("first_event_id"),
            "gpu_hours_lost",
            pl.col("evidence").str.split("\n").list.first().alias("sample"),
            pl.col("template").alias("signature"),
            pl.coalesce("message", pl.col("evidence").str.replace(r"^\[\S+\] \S+ ", "")).alias("message"),
            "gpu_model",
        )
    )


def criteria(k: KnownIssue) -> pl.Expr:
    """True where a subject meets the entry's match and scope (keys AND-ed, values OR-ed)."""
    e = pl.lit(True)
    if k.rules:
        e = e & pl.col("rule_ids").list.eval(pl.element().is_in(list(k.rules))).list.any()
    if k.categories:
        e = e & pl.col("category").is_in(list(k.categories))
    if k.xids:
        e = e & pl.col("xids").list.eval(pl.element().is_in(list(k.xids))).list.any()
    if k.sxids:
        e = e & pl.col("sxids").list.eval(pl.element().is_in(list(k.sxids))).list.any()
    if k.signatures:
        e = e & pl.col("signature").is_in(list(k.signatures))
    if k.message is not None:
        e = e & pl.col("message").str.contains(k.message)
    for col, values in (
        ("provider", k.providers),
        ("cluster", k.clusters),
        ("rack", k.racks),
        ("node", k.nodes),
        ("gpu_model", k.gpu_models),
        ("driver", k.drivers),
    ):
        if values:
            e = e & pl.col(col).is_in(list(values))
    if k.since is not None:
        e = e & (pl.col("day") >= k.since)
    if k.until is not None:
        e = e & (pl.col("day") <= k.until)
    return e.fill_null(False)


def in_force(k: KnownIssue) -> pl.Expr:
    return pl.lit(True) if k.ends is None else pl.col("day") <= k.ends


def match_subjects(registry: Registry, subj: pl.DataFrame) -> pl.DataFrame:
    """Per subject, the index of the entry applied (``_ki``, null: none), and one row per
    (entry, subject) that met the entry's criteria: ``known_issue_matches``."""
    subj = subj.with_columns(day=pl.col("ts").dt.date())
    hits = [criteria(k) for k in registry.issues]
    applied = pl.coalesce(
        [pl.when(h & in_force(k)).then(pl.lit(i, pl.Int32)) for i, (k, h) in enumerate(zip(registry.issues, hits))]
        + [pl.lit(None, pl.Int32)]
    )
    subj = subj.with_columns(_ki=applied)
    parts = []
    for i, (k, h) in enumerate(zip(registry.issues, hits)):
        after = "after_close" if k.closed is not None and k.ends == k.closed else "after_expiry"
        part = subj.filter(h).with_columns(
            known_issue_id=pl.lit(k.id),
            state=pl.when(~in_force(k))
            .then(pl.lit(after))
            .when(pl.col("_ki") == i)
            .then(pl.lit("applied"))
            .otherwise(pl.lit("shadowed")),
            overridden=(pl.col("_ki") == i).fill_null(False) & pl.lit(k.root_cause is not None or k.action is not None)
            | (pl.col("_ki") == i).fill_null(False) & (pl.col("kind") == "incident") & pl.lit(k.severity is not None),
        )
        parts.append(part)
    cols = MATCH_COLUMNS
    matches = (
        pl.concat([p.select(cols) for p in parts], how="vertical_relaxed")
        if parts
        else pl.DataFrame(schema=_match_schema())
    )
    return subj, matches.sort("known_issue_id", "ts", "kind", "ref")


MATCH_COLUMNS = [
    "known_issue_id",
    "kind",
    "ref",
    "provider",
    "cluster",
    "rack",
    "node",
    "job_id",
    "ts",
    "category",
    "severity",
    "gpu_hours_lost",
    "state",
    "overridden",
    "sample",
]


def _match_schema() -> dict:
    s = pl.String
    return {
        "known_issue_id": s,
        "kind": s,
        "ref": s,
        "provider": s,
        "cluster": s,
        "rack": s,
        "node": s,
        "job_id": s,
        "ts": UTC,
        "category": s,
        "severity": s,
        "gpu_hours_lost": pl.Float64,
        "state": s,
        "overridden": pl.Boolean,
        "sample": s,
    }


def _pick(registry: Registry, attr: str) -> dict[int, str | None]:
    return {i: getattr(k, attr) for i, k in enumerate(registry.issues)}


def _override(
    df: pl.DataFrame, tagged: pl.DataFrame, registry: Registry, fields: dict[str, str], domains
) -> pl.DataFrame:
    """``df`` (one row per subject, same order as ``tagged``) with known_issue_id, the entry's
    verdict in place of the rules' one, and the replaced values in ``original_<field>``."""
    ki = tagged["_ki"]
    ids = {i: k.id for i, k in enumerate(registry.issues)}
    over = {i: any(getattr(k, a) is not None for a in fields.values()) for i, k in enumerate(registry.issues)}
    df = df.with_columns(
        _ki=ki,
        known_issue_id=ki.replace_strict(ids, default=None, return_dtype=pl.String),
        _over=ki.replace_strict(over, default=False, return_dtype=pl.Boolean).fill_null(False),
    )
    new = {}
    for col, attr in fields.items():
        value = pl.col("_ki").replace_strict(_pick(registry, attr), default=None, return_dtype=pl.String)
        new[col] = pl.coalesce(value, pl.col(col))
        df = df.with_columns(pl.when(pl.col("_over")).then(pl.col(col)).alias(f"original_{col}"))
    df = df.with_columns(**new)
    if "domain" in df.columns:
        cat = "root_cause" if "root_cause" in fields else "category"
        df = df.with_columns(
            domain=pl.when(pl.col("_over"))
            .then(pl.col(cat).replace_strict(domains, default="unknown", return_dtype=pl.String))
            .otherwise(pl.col("domain"))
        )
    return df.drop("_ki", "_over")


def apply(
    registry: Registry,
    incidents: pl.DataFrame,
    failures: pl.DataFrame,
    events: pl.DataFrame,
    inventory: pl.DataFrame,
    domains: dict[str, str],
    as_of: dt.date | None,
) -> dict[str, pl.DataFrame]:
    """incidents and job_failures tagged (and overridden), known_issue_matches, known_issues."""
    registry = registry or EMPTY
    loads = driver_loads(events)
    isub = _with_driver(incident_subjects(incidents, events, inventory), loads)
    jsub = _with_driver(job_subjects(failures, events, inventory), loads)
    isub, imatch = match_subjects(registry, isub)
    jsub, jmatch = match_subjects(registry, jsub)
    incidents = _override(
        incidents, isub, registry, {"category": "root_cause", "severity": "severity", "action": "action"}, domains
    )
    failures = _override(failures, jsub, registry, {"root_cause": "root_cause", "action": "action"}, domains)
    failures = failures.with_columns(
        decided_by=pl.when(pl.col("original_root_cause").is_not_null() | pl.col("original_action").is_not_null())
        .then(pl.format("{}+known_issue:{}", "decided_by", "known_issue_id"))
        .otherwise(pl.col("decided_by"))
    )
    matches = pl.concat([imatch, jmatch], how="vertical_relaxed").sort("known_issue_id", "ts", "kind", "ref")
    return {
        "incidents": incidents,
        "job_failures": failures,
        "known_issue_matches": matches,
        "known_issues": summary(registry, matches, as_of),
    }


def summary(registry: Registry, matches: pl.DataFrame, as_of: dt.date | None) -> pl.DataFrame:
    """One row per entry: its status on ``as_of`` and what it matched and cost."""
    rows = []
    for k in registry.issues:
        m = matches.filter(pl.col("known_issue_id") == k.id)
        ap = m.filter(pl.col("state") == "applied")
        since = ap.filter(pl.col("ts").dt.date() >= k.opened) if k.opened else ap
        jobs, jobs_since = ap.filter(pl.col("kind") == "job_failure"), since.filter(pl.col("kind") == "job_failure")
        late = m.filter(pl.col("state").is_in(["after_expiry", "after_close"]))
        last = ap["ts"].max() if ap.height else None
        rows.append(
            {
                "known_issue_id": k.id,
                "title": k.title,
                "status": k.status(as_of, last.date() if last else None, registry.quiet_days) if as_of else "open",
                "as_of": as_of,
                "opened": k.opened,
                "expires": k.expires,
                "closed": k.closed,
                "ticket": k.ticket,
                "owner": k.owner,
                "runbook": k.runbook,
                "hotfix": k.hotfix,
                "drain": k.says_drain(),
                "verdict": k.verdict_text(),
                "match": describe_match(k),
                "scope": describe_scope(k),
                "incidents": ap.filter(pl.col("kind") == "incident").height,
                "jobs": jobs.height,
                "gpu_hours_lost": float(jobs["gpu_hours_lost"].sum() or 0.0),
                "matches_since_opened": since.height,
                "jobs_since_opened": jobs_since.height,
                "gpu_hours_lost_since_opened": float(jobs_since["gpu_hours_lost"].sum() or 0.0),
                "nodes": ap["node"].drop_nulls().n_unique(),
                "first_seen": ap["ts"].min() if ap.height else None,
                "last_seen": last,
                "shadowed": m.filter(pl.col("state") == "shadowed").height,
                "matches_after_end": late.height,
                "last_after_end": late["ts"].max() if late.height else None,
                "file": registry.path,
                "file_sha256": registry.sha256,
                "line": k.line,
            }
        )
    from ..schema import ANALYTICS

    return (
        pl.DataFrame(rows, schema=ANALYTICS["known_issues"], orient="row")
        if rows
        else pl.DataFrame(schema=ANALYTICS["known_issues"])
    )


def _named(fields: tuple[tuple[str, tuple], ...]) -> list[str]:
    """``name a or b`` for each field that has values."""
    return [f"{name} {' or '.join(str(v) for v in values)}" for name, values in fields if values]


def describe_match(k: KnownIssue) -> str:
    fields = (("rule", k.rules), ("category", k.categories), ("xid", k.xids), ("sxid", k.sxids))
    parts = _named((*fields, ("signature", k.signatures)))
    if k.message is not None:
        parts.append(f"message ~ /{k.message}/")
    return "; ".join(parts)


def describe_scope(k: KnownIssue) -> str:
    fields = (("provider", k.providers), ("cluster", k.clusters), ("rack", k.racks), ("node", k.nodes))
    parts = _named((*fields, ("gpu_model", k.gpu_models), ("driver", k.drivers)))
    if k.since or k.until:
        parts.append(f"days {k.since or '...'} to {k.until or '...'}")
    return "; ".join(parts) or "everywhere"
