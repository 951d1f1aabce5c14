"""One failed job's verdict from its output files alone (``faultline diagnose``): parsed as the
landing folder's files are, the job from sacct or its files' times, decided by the nightly
engine (``attribution.attribute_failures``); docs/diagnose.md."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..classify.model import apply_model
from ..classify.ruleset import RuleSet, load_ruleset
from ..ingest.hostlist import compress_hostlist
from ..ingest.landing import valid_name
from ..ingest.lines import maybe_decompress
from ..ingest.parse import ParseResult, SourceContext, parse_files, parse_stream
from ..ingest.sacct import parse_sacct
from ..schema import EVENTS, SACCT_JOBS
from .attribution import NOT_FAILED, attribute_failures, deciding_lines
from .config import DEFAULT, AnalyticsConfig

PROVIDER = CLUSTER = "local"
DEFAULT_JOB_ID = "job"
SLURM_OUTPUT_RE = re.compile(r"^slurm-(\d+(?:_\d+)?)(?:\.[A-Za-z]+)+$")  # slurm-123.out, slurm-123_4.out
COMPRESSED = (".gz", ".zst")


class DiagnoseError(ValueError):
    """An input that cannot be read at all (missing, a directory, no permission, no sacct rows)."""


@dataclass
class Diagnosis:
    verdict: dict  # the job's job_failures row
    evidence: list[dict]  # the deciding lines: source, line_no, text, category
    job: dict  # job_id, state, started, ended, nodes
    next_steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def readable(path: str) -> None:
    """Raise ``DiagnoseError`` with one clear line when ``path`` cannot be read as a file."""
    if path == "-":
        return
    p = Path(path)
    try:
        if p.is_dir():
            raise DiagnoseError(f"{path}: is a directory, not a log file")
        with open(p, "rb") as f:
            f.read(1)
    except DiagnoseError:
        raise
    except FileNotFoundError:
        raise DiagnoseError(f"{path}: no such file") from None
    except PermissionError:
        raise DiagnoseError(f"{path}: permission denied") from None
    except OSError as exc:
        raise DiagnoseError(f"{path}: cannot read: {exc.strerror or exc}") from None


#: kernel-log file names that name no node (the log's kind, not its host)
GENERIC_LOG_NAMES = frozenset({"dmesg", "kernel", "kern", "syslog", "messages", "journal", "journalctl", "kmsg"})


def node_of_file(path: str) -> str:
    """The node a kernel log is named after: ``node-a17.log`` (.gz, .zst) -> ``node-a17``."""
    name = Path(path).name
    for suffix in COMPRESSED:
        name = name.removesuffix(suffix)
    stem, _dot, _ext = name.rpartition(".")
    return stem or name


def job_id_of(paths: list[str]) -> str | None:
    """The job id a Slurm output file name carries (``slurm-123.out``, ``slurm-123_4.out``)."""
    for path in paths:
        name = Path(path).name
        for suffix in COMPRESSED:
            name = name.removesuffix(suffix)
        m = SLURM_OUTPUT_RE.match(name)
        if m:
            return m.group(1)
    return None


def _parse(items: list[tuple[str, SourceContext]], rs: RuleSet, stdin, read: dict) -> list[ParseResult]:
    files = [(p, c) for p, c in items if p != "-"]
    out = dict(zip([p for p, _ in files], parse_files(files, rs))) if files else {}
    results = []
    for path, ctx in items:
        if path == "-":
            if "-" not in read:  # kept: a second parse reads it again
                read["-"] = (stdin or sys.stdin.buffer).read()
            results.append(parse_stream(maybe_decompress(read["-"]), ctx, rs))
        else:
            results.append(out[path])
    return results


def _sacct_job(path: str, wanted: str | None) -> pl.DataFrame:
    if path == "-":
        raise DiagnoseError("--sacct must name a file ('-' is for the job output)")
    readable(path)
    res = parse_sacct(Path(path).read_bytes(), source=path)
    jobs = res.jobs
    if not jobs.height:
        raise DiagnoseError(f"{path}: no job rows in this sacct output ({res.error or 'no sacct -P header?'})")
    if wanted is not None and wanted in jobs["job_id"].to_list():
        return jobs.filter(pl.col("job_id") == wanted).head(1)
    if jobs.height == 1:
        return jobs
    failed = jobs.filter(~pl.col("state").is_in(NOT_FAILED))
    return (failed if failed.height else jobs).sort("end", nulls_last=False).tail(1)


def _window(job_events: pl.DataFrame, node_events: pl.DataFrame) -> tuple[dt.datetime, dt.datetime]:
    """The job's start and end from its own lines' times, else its nodes', else now."""
    for ev in (job_events, node_events):
        ts = ev["ts"].drop_nulls().dt.truncate("1s")
        if len(ts):
            return ts.min(), ts.max()
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return now, now


#: the note of a verdict that read kernel lines the nightly run cannot place (no time)
UNTIMED_NOTE = "without a time were taken as of the job's end"


def _jobs_frame(job: dict) -> pl.DataFrame:
    return pl.DataFrame({c: [job.get(c)] for c in SACCT_JOBS.names()}, schema=SACCT_JOBS).with_columns(
        provider=pl.lit(PROVIDER), cluster=pl.lit(CLUSTER)
    )


def diagnose(
    logs: list[str],
    *,
    kernel: list[str] = (),
    nodes: list[str] = (),
    sacct: str | None = None,
    ref_date: dt.date | None = None,
    boots: list[dt.datetime] = (),
    rs: RuleSet | None = None,
    cfg: AnalyticsConfig = DEFAULT,
    stdin=None,
) -> Diagnosis:
    """The verdict on one job whose output is ``logs`` (``-``: stdin; plain, .gz or .zst)."""
    if not logs:
        raise DiagnoseError("no job output given")
    if [*logs, *kernel].count("-") > 1:
        raise DiagnoseError("'-' (stdin) can be given once")
    if "-" in kernel and len(nodes) != 1:
        raise DiagnoseError("a kernel log on stdin (--kernel -) needs exactly one --node")
    for path in (*logs, *kernel):
        readable(path)
    # the verdict reads only the rank lines of the marker pass (not progress or checkpoints)
    rs = dataclasses.replace(rs or load_ruleset(), marker_kinds=("rank",))
    notes: list[str] = []
    sacct_row = _sacct_job(sacct, job_id_of(logs)) if sacct else None
    if sacct_row is not None:
        job = sacct_row.row(0, named=True)
        if ref_date is None and job["end"] is not None:
            ref_date = job["end"].date()
    else:
        job = {"job_id": job_id_of(logs) or DEFAULT_JOB_ID, "state": "FAILED"}
    job_id = job["job_id"]

    def ctx(path: str, kind: str, node: str | None = None) -> SourceContext:
        own = job_id if kind == "job" else None
        return SourceContext(
            source=path,
            kind=kind,
            ref_date=ref_date,
            node=node,
            provider=PROVIDER,
            cluster=CLUSTER,
            job_id=own,
            boots=list(boots) if kind == "kernel" and boots else None,
        )

    def kernel_node(path: str) -> str | None:
        if len(nodes) == 1:
            return nodes[0]
        name = node_of_file(path)
        return None if name.lower() in GENERIC_LOG_NAMES else name

    def contexts() -> list[tuple[str, SourceContext]]:
        return [(p, ctx(p, "job")) for p in logs] + [(p, ctx(p, "kernel", kernel_node(p))) for p in kernel]

    read: dict[str, bytes] = {}
    items = contexts()
    results = _parse(items, rs, stdin, read)
    anchor = _dated_day(results, items, read) if ref_date is None else None
    if anchor is not None and abs((dt.datetime.now(dt.timezone.utc).date() - anchor).days) > 31:
        # an old log: its year-less stamps take their year from its dated ones, not from today
        ref_date = anchor
        items = contexts()
        results = _parse(items, rs, stdin, read)
    for (path, _c), res in zip(items, results):
        if res.message and not res.lines_read:
            raise DiagnoseError(f"{path}: {res.message}")
        if res.message:
            notes.append(f"{path}: {res.message}; the lines before it were read")
        if res.quarantined:
            notes.append(f"{path}: {res.quarantined} line(s) could not be read (binary, invalid UTF-8 or too long)")
        if not res.lines_read:
            notes.append(f"{path}: empty")
    if not any(r.lines_read > r.quarantined for r in results):  # nothing a verdict could rest on
        raise DiagnoseError(f"{', '.join(p for p, _c in items)}: {_nothing_readable(results)}")
    frames = [r.events for r in results]
    events = pl.concat(frames) if frames else pl.DataFrame(schema=EVENTS)
    # a kernel log named for no node (dmesg.txt, kern.log): its nodes are the hosts its lines name
    file_nodes: dict[str, list[str]] = {}
    for path in kernel:
        own = kernel_node(path)
        if own is not None:
            file_nodes[path] = [own]
            continue
        mine = pl.col("source") == path
        hosts = events.filter(mine)["node"].drop_nulls().unique(maintain_order=True).to_list()
        if len(hosts) > 1:
            file_nodes[path] = hosts
            continue
        fill = hosts[0] if hosts else node_of_file(path)
        if not hosts:
            notes.append(f"{path}: neither its name nor its lines name a node: taken as node {fill} (give --node)")
        file_nodes[path] = [fill]
        events = events.with_columns(node=pl.when(mine).then(pl.coalesce("node", pl.lit(fill))).otherwise("node"))
    is_job = pl.col("job_id") == job_id
    job_ev = events.filter(is_job)
    node_ev = events.filter(pl.col("job_id").is_null())
    undated = node_ev.filter(pl.col("ts").is_null() & (pl.col("category") != "benign")).height

    if sacct_row is None:
        start, end = _window(job_ev, node_ev)
        names = list(dict.fromkeys([*nodes, *(n for p in kernel for n in file_nodes[p])]))
        job.update(
            start=start,
            end=end,
            nodes=names,
            n_nodes=len(names),
            nodelist=compress_hostlist(names) if names else None,
        )
    for path in kernel:
        for name in file_nodes[path]:
            if name not in (job.get("nodes") or []):
                notes.append(f"{path}: node {name} is not one of the job's nodes: its lines were not used")
    if job.get("end") is None:
        job["end"] = _window(job_ev, node_ev)[1]
        notes.append("sacct gives no end time: the last time in the files is taken")
    if job["state"] in NOT_FAILED:
        notes.append(f"sacct says the job ended {job['state']}: diagnosed as if it had failed")
        job["state"] = "FAILED"
    jobs = _jobs_frame(job)
    if undated:
        # a kernel log the user named whose lines carry no time (raw dmesg): taken as of the job's end
        untimed = pl.col("job_id").is_null() & pl.col("ts").is_null()
        events = events.with_columns(
            ts=pl.when(untimed).then(pl.lit(job["end"]).cast(events.schema["ts"])).otherwise("ts"),
            ts_source=pl.when(untimed).then(pl.lit("job_end")).otherwise("ts_source"),
        )
        notes.append(f"{undated} kernel line(s) {UNTIMED_NOTE} (raw dmesg: --boot places them)")

    # the job output's rank lines (job_markers rows), as the nightly run reads them from the lake
    marks = [
        r.markers.with_columns(provider=pl.lit(PROVIDER), cluster=pl.lit(CLUSTER), job_id=pl.lit(job_id))
        for (_p, c), r in zip(items, results)
        if c.kind == "job" and r.markers is not None and r.markers.height
    ]
    events = apply_model(events)
    rows = attribute_failures(
        jobs,
        events,
        None,
        rs.taxonomy.domains,
        cfg,
        rs,
        markers=pl.concat(marks, how="vertical_relaxed") if marks else None,
    )
    verdict = rows.row(0, named=True)
    evidence = _deciding_lines(events, verdict["evidence_events"] or [], rs)
    job_info = {
        "job_id": job_id,
        "state": job["state"],
        "started": job.get("start"),
        "ended": job["end"],
        "nodes": list(job.get("nodes") or []),
    }
    return Diagnosis(verdict, evidence, job_info, next_steps(verdict), notes)


_DATED = re.compile(rb"\b(20\d\d)-([01]\d)-([0-3]\d)[T ][0-2]\d:[0-5]\d")
_TAIL = 1 << 20  # bytes of a file's end searched for a dated stamp


def _dated_day(results: list[ParseResult], items: list, read: dict) -> dt.date | None:
    """Where year-less stamps need a year: the day of the latest stamp that carries one, among
    the events, else in the last MiB of each plain input (the job's end is at its end)."""
    ev = [r.events for r in results if r.events is not None and r.events.height]
    ev = pl.concat(ev, how="vertical_relaxed") if ev else None
    if ev is None or not ev.filter(pl.col("ts_source") == "yearless").height:
        return None
    ts = ev.filter(pl.col("ts_source").is_in(["absolute", "naive_utc"]))["ts"].drop_nulls()
    if len(ts):
        return ts.max().date()
    days = []
    for path, _ctx in items:
        if path == "-":
            tail = read.get("-", b"")[-_TAIL:]
        elif Path(path).suffix in (".gz", ".zst"):
            continue
        else:
            with open(path, "rb") as f:
                f.seek(max(0, Path(path).stat().st_size - _TAIL))
                tail = f.read()
        for m in _DATED.finditer(tail):
            try:
                days.append(dt.date(int(m[1]), int(m[2]), int(m[3])))
            except ValueError:
                pass
    return max(days) if days else None


def _nothing_readable(results: list) -> str:
    lines = sum(r.lines_read for r in results)
    if not lines:
        return "empty: no line to diagnose"
    return f"no readable line to diagnose ({lines} line(s), all binary, invalid UTF-8 or longer than 1 MiB)"


def _deciding_lines(events: pl.DataFrame, ids: list[str], rs: RuleSet) -> list[dict]:
    """Each deciding event as the physical line that decided it, in the verdict's order."""
    rows = {r["event_id"]: r for r in deciding_lines(events.filter(pl.col("event_id").is_in(ids)), rs).to_dicts()}
    return [
        {
            "source": rows[i]["source"],
            "line_no": int(rows[i]["line_no"]) + int(rows[i]["line_offset"]),
            "text": rows[i]["line"],
            "category": rows[i]["category"],
        }
        for i in ids
        if i in rows
    ]


def _cmd_name(name: str | None) -> str | None:
    """A node or GPU name safe to put into a suggested shell command, else None."""
    return name if name and valid_name(name) and not name.startswith("-") else None


def next_steps(v: dict) -> list[str]:
    """What to do about the verdict: drain, reboot, restart, fix the code, look elsewhere."""
    node, gpu, rank = _cmd_name(v["culprit_node"]), _cmd_name(v["culprit_gpu"]), v["culprit_rank"]
    cause, action = v["root_cause"], v["action"]
    who = f"node {node}" if node else "the culprit node"
    drain = (
        f'scontrol update nodename={node} state=drain reason="faultline: {cause}"'
        if node
        else "drain the node that ran the failing rank (scontrol update nodename=NODE state=drain reason=...)"
    )
    resubmit = f"resubmit the job without it (sbatch --exclude={node} ...)" if node else "resubmit the job"
    steps = {
        "drain_node": [drain, resubmit],
        "inspect_hardware": [drain, f"run the vendor's field diagnostics on {who} (RMA if they fail)", resubmit],
        "reset_gpu": [drain, f"reset GPU {gpu} on {who} (nvidia-smi -r -i {gpu})" if gpu else f"reset the GPU on {who}"]
        + [resubmit],
        "reboot_node": [drain, f"reboot {who} (scontrol reboot {node})" if node else f"reboot {who}", resubmit],
        "check_network": [f"check the links of {who}: ibstat, the cable and the switch port", resubmit],
        "check_storage": ["check the file system the job writes to: free space, quota, mount", "restart the job"],
        "contact_provider": [f"open a ticket with the provider for {who}", resubmit],
        "restart_job": ["restart the job (from its last checkpoint)"],
        "fix_application": [
            "fix the code or the job's configuration: the error is the program's own"
            + (f" (rank {rank})" if rank is not None else "")
        ],
    }.get(action)
    if steps:
        return steps
    if v["decided_by"] and v["decided_by"].endswith("+peer_gone"):
        peer = f"the peer {v['culprit_node']}" if v["culprit_node"] else "a peer"
        return [f"{peer} went away first: diagnose its own output and its node's kernel log"]
    if cause == "unknown":
        return ["no cause in these lines: add the nodes' kernel logs (--kernel) or the other ranks' output"]
    return ["nothing to do: the scheduler ended the job"] if cause == "scheduler" else []


def _iso(t) -> str | None:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(t, dt.datetime) else None


def to_json(d: Diagnosis) -> dict:
    """The one JSON object ``--format json`` prints (docs/diagnose.md)."""
    v = d.verdict
    return {
        "root_cause": v["root_cause"],
        "domain": v["domain"],
        "culprit_node": v["culprit_node"],
        "culprit_rank": v["culprit_rank"],
        "culprit_gpu": v["culprit_gpu"],
        "confidence": v["confidence"],
        "action": v["action"],
        "decided_by": v["decided_by"],
        "evidence": [{k: e[k] for k in ("source", "line_no", "text", "category")} for e in d.evidence],
        "symptoms": v["symptoms"],
        "summary": v["evidence"],
        "next_steps": d.next_steps,
        "job": {**d.job, "started": _iso(d.job["started"]), "ended": _iso(d.job["ended"])},
        "notes": d.notes,
    }


def _culprit(v: dict) -> str:
    parts = [f"node {v['culprit_node']}" if v["culprit_node"] else None]
    parts += [f"rank {v['culprit_rank']}" if v["culprit_rank"] is not None else None]
    parts += [f"GPU {v['culprit_gpu']}" if v["culprit_gpu"] else None]
    return ", ".join(p for p in parts if p) or "not named by these lines"


def _no_lines(d: Diagnosis) -> str:
    if d.verdict["decided_by"].startswith("state:") and d.verdict["root_cause"] != "unknown":
        return f"no error line decided: the job's final state {d.job['state']} did"
    return "no error line in these files"


def render_text(d: Diagnosis) -> str:
    """The verdict for a terminal; log text is made safe (no escape sequences)."""
    from ..report.sanitize import terminal as t

    v = d.verdict
    out = [
        f"verdict     {t(v['root_cause'])} ({t(v['domain'])}), confidence {v['confidence']:.2f}",
        f"culprit     {t(_culprit(v))}",
        f"action      {t(v['action'])}",
        f"decided by  {t(v['decided_by'])}",
    ]
    if d.evidence:
        for i, e in enumerate(d.evidence):
            head = "evidence    " if i == 0 else "            "
            out.append(f"{head}{t(e['source'])}:{e['line_no']}  [{t(e['category'])}]  {t(e['text'], max_len=300)}")
    else:
        out.append(f"evidence    {t(_no_lines(d))}")
    n = v["symptoms"]
    out.append(f"symptoms    {n} other error line(s) in the evidence (the cascade)" if n else "symptoms    none")
    for i, step in enumerate(d.next_steps):
        out.append(("next        " if i == 0 else "            ") + t(step))
    for i, note in enumerate(d.notes):
        out.append(("note        " if i == 0 else "            ") + t(note, max_len=300))
    return "\n".join(out)


def render_markdown(d: Diagnosis) -> str:
    """The verdict for a ticket; log text is escaped (no Markdown or HTML from the logs)."""
    from ..report.sanitize import md_escape as m

    v = d.verdict
    out = [
        f"### Job {m(d.job['job_id'])}: {m(v['root_cause'])} ({m(v['domain'])})",
        "",
        "| | |",
        "| --- | --- |",
        f"| confidence | {v['confidence']:.2f} |",
        f"| culprit | {m(_culprit(v))} |",
        f"| action | {m(v['action'])} |",
        f"| decided by | {m(v['decided_by'])} |",
        f"| symptoms | {v['symptoms']} other error line(s) |",
        "",
        "Deciding lines:",
        "",
    ]
    out += [f"- {m(e['source'])}:{e['line_no']} ({m(e['category'])}): {m(e['text'], max_len=300)}" for e in d.evidence]
    if not d.evidence:
        out.append(f"- {m(_no_lines(d))}")
    out += ["", "Next:", ""] + [f"- {m(s)}" for s in d.next_steps]
    if d.notes:
        out += ["", "Notes:", ""] + [f"- {m(n, max_len=300)}" for n in d.notes]
    return "\n".join(out)
