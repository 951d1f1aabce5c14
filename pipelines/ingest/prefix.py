"""Strip and interpret line prefixes (timestamps, hosts, tags, rank labels) with polars: every
prefix format is one alternative of ``PREFIX_RE`` (job output's launcher labels, ``JOB_LABELS``,
are read first), and every timestamp says how it was turned into UTC (``ts_source``)."""

from __future__ import annotations

import datetime as dt
import functools
import re

import polars as pl

_HOST = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_MON = r"(?:[^\W\d_]{3,5}\.?|1?\d[月월])"  # Nov, Dez, déc., avril, sept., 11月, 11월 (localized syslog)
_SEVERITY = r"(?:(?:EMERG|ALERT|CRIT|ERR|WARNING|NOTICE|INFO|DEBUG)\s+)?"  # rsyslog's %syslogseverity-text%
# kernel:  nvidia-fabricmanager[812]:  (udev-worker)[106246]:  swss#portsyncd: (SONiC)
_TAG = r"[A-Za-z0-9_.@/()#-]+(?:\[\d+\])?:"
_ANSI = r"(?:\x1b\[[0-9;]*m|\^\[\[[0-9;]*m)"  # a terminal colour code, raw or as pasted (^[[1;36m)
_STAMP_Z = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)"
_STAMP_N = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
# tqdm's bar ("desc:  19%|###   | 3237/16700 [3:34:12<38:35:22, 10.32s/it]"), when the next
# log line is glued to it without a newline
_TQDM = r"(?:[^|]{0,80}?:)?\s*\d{1,3}%\|[^|]*\|\s*[\d.]+[kMG]?/[\d.]+[kMG]?\s*\[[^\]]*\]"

# Launcher labels in front of a job-output line, outermost first: (what writes it, regex).
# Each is optional; their named groups say the node, rank and local rank the label gives.
JOB_LABELS = (
    # pdsh / clush / DeepSpeed's multi-node launcher: "worker-5: " (a host name holds a digit,
    # so "RuntimeError: " is not one; "slurmstepd-<node>: " is slurmstepd's own and stays);
    # DeepSpeed's "localhost: " names no node
    (
        "pdsh host",
        r"(?:(?P<stepd>slurmstepd-)|(?:(?P<job_host>[A-Za-z][\w-]*\d[\w.-]*|\d{1,3}(?:\.\d{1,3}){3})|localhost):\s)?",
    ),
    # a log collector's stamp, or mpirun --timestamp-output's ctime glued to its tag
    (
        "collector stamp",
        rf"(?:(?P<lead_z>{_STAMP_Z}):?\s+|(?P<lead_zs>{_STAMP_N} [+-]\d\d:?\d\d)\s+|(?P<lead_n>{_STAMP_N})\s+|(?P<lead_c>[A-Z][a-z]{{2}} [A-Z][a-z]{{2}} [ \d]\d \d\d:\d\d:\d\d \d{{4}})\s?)?",
    ),
    # srun -l right-aligns its task ids: " 7: " among 16 tasks
    ("srun -l task id", r"(?:\s{0,4}(?P<srun_task>\d{1,5}):\s)?"),
    # mpirun --tag-output "[1,12]<stdout>:", horovodrun's "[12]<stderr>:"
    ("mpirun --tag-output", r"(?:\[(?:\d+,)?(?P<mpi_rank>\d+)\]<(?:stdout|stderr)>:)?"),
    (
        "Ray / vLLM worker",
        rf"(?:{_ANSI}?\((?:raylet|[A-Za-z]\w*(?: TP(?P<ray_tp>\d+)| rank=(?P<ray_rank>\d+))?"
        rf" pid=\d+(?:, ip=(?P<ray_ip>\d{{1,3}}(?:\.\d{{1,3}}){{3}}))?)\){_ANSI}?\s?)?",
    ),
    ("torchx / NeMo-Run replica", r"(?:[A-Za-z][\w.-]{2,}/\d{1,4}\s(?:\[(?P<tx_local_rank>\d+)\]:)?)?"),
    # "[default3]:" (role and local rank), then PyTorch's own "[rank12]:" (sometimes twice) or
    # Lightning's "[rank: 3] "; a paste's "[1830] " line number may stand in front of either
    ("torchrun --tee local rank", r"(?:(?:\[\d{3,7}\]\s)?\[default(?P<local_rank>\d+)\]:)?"),
    ("PyTorch rank", r"(?:(?:\[\d{3,7}\]\s)?\[rank(?:: )?(?P<job_rank>\d+)\](?::(?:\[rank\d+\]:)?\s?|\s))?"),
    ("tqdm bar", rf"(?:{_TQDM})?"),
)
JOB_LABEL_RE = "^" + "".join(rx for _name, rx in JOB_LABELS) + r"(?P<rest>.*)$"
#: the fields ``JOB_LABEL_RE`` adds to ``split_prefix``'s struct (null on other lines)
JOB_FIELDS = (
    "stepd",
    "job_host",
    "lead_z",
    "lead_zs",
    "lead_n",
    "lead_c",
    "srun_task",
    "mpi_rank",
    "ray_tp",
    "ray_rank",
    "ray_ip",
    "tx_local_rank",
    "local_rank",
    "job_rank",
)

# Outer wrappers pasted in front of anything: markdown indentation / a line number, a pdsh
# or clush host label, a torchrun / srun rank label.
_LABEL = r"^(?:\[(?:rank|default)(?P<rank_label>\d+)\]:\s?|(?P<srun_label>\d+):\s)?"
# A pasted line number, grep's file name (grep -r/-H: "/var/log/messages:", "kern.log:") and a
# pdsh/clush host label count only in front of a known stamp.
_GREP_FILE = r"(?:/[\w./-]+|(?:messages|syslog|kern\.log|daemon\.log)[\w.-]*):"  # fails fast elsewhere
_PASTED = rf"[ \t>]*(?:{_GREP_FILE})?(?:\d{{1,7}}(?:[:|]\s*|\s+))?(?:(?P<pdsh>{_HOST}):\s+)?"
_ALTS = [
    # <6>1 2026-11-24T03:14:07.123Z host app - - - msg  (RFC 5424 proper)
    r"<\d{1,3}>1 (?P<iso5424>\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d)) (?P<host5424>\S+) (?P<tag5424>\S+) \S+ \S+ (?:-|\[.*?\]) ?",
    # dmesg -x: "kern  :warn  : " then the iso form with a decimal comma
    r"(?:[a-z]+\s*:[a-z]+\s*:\s)?(?P<diso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+(?:[+-]\d\d:?\d\d|Z)?)\s",
    # RFC 3339 syslog / journald short-iso, optional host (journalctl --no-hostname); without a
    # zone (rsyslog's date-rfc3339 on a host set to UTC) it is read as UTC
    rf"(?P<iso>\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+(?:(?P<host_iso>{_HOST})\s+)?(?P<tag_iso>{_TAG})\s?",
    # Talos / syslog-over-network: "kern: warning: [2026-11-24T03:14:07.123456789Z]: msg"
    r"[a-z]+:\s+[a-z]+:\s+\[(?P<talos>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\]:\s",
    # BSD syslog (no year), with journalctl -o short-precise's microseconds and the severity
    # name SONiC's rsyslog template writes before the tag
    rf"(?P<bsd>{_MON}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d(?:\.\d{{1,9}})?)\s+(?:(?P<host_bsd>{_HOST})\s+)?{_SEVERITY}(?P<tag_bsd>{_TAG})\s?",
    # /dev/kmsg record: priority,sequence,usec,flags;
    r"(?P<kmsg_pri>\d{1,3}),\d+,(?P<kmsg_us>\d+),[^;]*;",
    # raw dmesg, optional printk level and the caller id CONFIG_PRINTK_CALLER adds ([  T650], [    C2])
    r"(?:<\d{1,3}>)?\[\s*(?P<mono>\d+\.\d+)\](?:\s?\[\s*[TC]\d{1,7}\])?\s?",
    # dmesg -T (local wall clock, no zone; localized day and month names), -x in front, a
    # syslog host and kernel tag after
    rf"(?:[a-z]+\s*:[a-z]+\s*:\s)?\[(?P<ctime>{_MON} {_MON}\s+\d{{1,2}} \d\d:\d\d:\d\d \d{{4}})\]\s?(?:(?P<host_ctime>{_HOST})\s+kernel:\s)?",
    # dmesg -H: [Nov24 03:14] and the relative [  +0.000812]
    r"\[(?P<hmon>[A-Z][a-z]{2})(?P<hday>\d{1,2}) (?P<htime>\d\d:\d\d)\]\s?",
    r"\[\s*\+(?P<rel>\d+\.\d+)\]\s?",
    # slurmctld / slurmd: [2026-11-24T03:14:07.123]
    r"\[(?P<slurm>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\]\s",
    # GPFS (mmfs.log): 2026-11-24_03:14:07.123+0100:
    r"(?P<mmfs>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:?\d\d):\s",
    # fabric manager: [Nov 24 2026 03:14:07]
    r"\[(?P<fm>[A-Z][a-z]{2} \d{1,2} \d{4} \d\d:\d\d:\d\d)\]\s",
    # torchrun / python logging: [2026-11-24 03:14:07,123] or 2026-11-24 03:14:07,123, with a
    # colon, bar or the next bracket after it (TensorFlow, Composer, Hydra); Go's log package
    # (device plugin, DCGM exporter): 2026/11/24 03:14:07
    r"\[?(?P<pylog>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)?|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]?[:|]?\s?",
    # glog: [E1124 03:14:07.123456789 file.cpp:632] or E1124 03:14:07.123456  1234 file.cc:12];
    # PyTorch's own writes the month unpadded: [E128 13:23:00.788972321 ...] is January 28
    r"\[?(?P<glog_lvl>[IWEF])(?P<glog>\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?)(?:\s+\d+)?\s+[\w./\\:-]+:\d+\]\s?",
    # a bare kernel tag (syslog with host and time cut off): "kernel: msg"
    r"(?P<ktag>kernel):\s",
]
# Job output's own loggers, read in job output only (before plain Python logging, which would
# take their stamps, except the last two)
_JOB_ALTS_FIRST = [
    # SGLang [2025-01-29 08:52:44 TP5], Ray's C++ [2024-04-16 00:03:25,080 E 7046 7269] logging.cc:361:,
    # NeMo [NeMo W 2025-03-07 22:34:10 rerun_state_machine:1088], Hugging Face
    # [INFO|trainer.py:2926] 2023-10-19 09:48:54,123 >>, torchtitan [titan] 2026-05-18 16:05:50,641 - root - INFO -,
    # Taskcluster [task 2025-07-01T05:06:30.004+00:00] [train]
    r"\[(?P<sgl>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) TP(?P<sgl_tp>\d+)(?: [A-Z]{2}\d+)*\]\s",
    r"\[(?P<raycc>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) [IWEF] \d+ \d+\] [\w.-]+:\d+:\s?",
    r"\[NeMo [DIWEC] (?P<nemo>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) [\w.-]+:\d+\]\s?",
    r"\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\|[\w./-]+:\d+\] (?P<hf>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) >> ",
    r"\[titan\] (?P<titan>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) - [\w.]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ",
    rf"\[task (?P<tc>{_STAMP_Z})\] (?:\[[\w-]+\] )?",
    # the Hugging Face example scripts' logging: 11/23/2023 07:08:28 - WARNING - datasets.builder -
    r"(?P<hfus>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d) - ",
]
_JOB_ALTS_LAST = [
    # PyTorch's C++ log lines without a time: [W Utils.hpp:108], [E ProcessGroupNCCL.cpp:414]
    r"\[(?P<glog_nt>[IWEF]) [\w./\\:-]+:\d+\]\s?",
    # vLLM: ERROR 09-05 21:05:38 [multiproc_executor.py:596] or INFO 10-14 12:32:47 file.py:233]
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<vllm>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[\w./-]+:\d+\]\s?",
]
_INNER_MONO = r"(?:\[\s*(?P<inner_mono>\d+\.\d{6})\]\s?)?"  # printk's stamp inside a syslog line


def _prefix_re(alts: list[str]) -> str:
    return _LABEL + "(?:" + _PASTED + "(?:" + "|".join(alts) + r"))?" + _INNER_MONO + r"(?P<msg>.*)$"


_PYLOG = next(i for i, a in enumerate(_ALTS) if "(?P<pylog>" in a)
PREFIX_RE = _prefix_re(_ALTS)
JOB_PREFIX_RE = _prefix_re(_ALTS[:_PYLOG] + _JOB_ALTS_FIRST + _ALTS[_PYLOG:] + _JOB_ALTS_LAST)

MONTHS = {
    # English, German, French, Spanish, Italian, Dutch abbreviations seen in localized syslog
    **{
        m: i + 1
        for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
    },
    "mär": 3,
    "mai": 5,
    "okt": 10,
    "dez": 12,
    "jän": 1,
    "janv": 1,
    "févr": 2,
    "fév": 2,
    "mars": 3,
    "avr": 4,
    "avril": 4,
    "sept": 9,
    "juin": 6,
    "juil": 7,
    "aoû": 8,
    "août": 8,
    "déc": 12,
    "ene": 1,
    "abr": 4,
    "ago": 8,
    "dic": 12,
    "gen": 1,
    "mag": 5,
    "giu": 6,
    "lug": 7,
    "set": 9,
    "ott": 10,
    "fev": 2,
    "out": 10,
    "mrt": 3,
    "mei": 5,
    "okt.": 10,
}


def _head_re(prefix_re: str) -> str:
    """The prefix alone: the regex stops where the message starts instead of capturing it."""
    return "^(?P<_head>" + prefix_re[1 : prefix_re.index("(?P<msg>.*)$")] + ")"


_HEAD_RE, _JOB_HEAD_RE = _head_re(PREFIX_RE), _head_re(JOB_PREFIX_RE)
PREFIX_FIELDS = tuple(re.findall(r"\(\?P<(\w+)>", PREFIX_RE))
JOB_PREFIX_FIELDS = tuple(re.findall(r"\(\?P<(\w+)>", JOB_PREFIX_RE))
#: every field job output adds to the other lines' prefix fields: labels and job loggers
JOB_ONLY_FIELDS = JOB_FIELDS + tuple(f for f in JOB_PREFIX_FIELDS if f not in PREFIX_FIELDS)


def job_label_prefix() -> str:
    """``JOB_LABELS`` and the job loggers' prefixes as one optional, non-capturing regex: what
    may stand in front of a job-output message on its raw line."""
    alts = _ALTS + _JOB_ALTS_FIRST + _JOB_ALTS_LAST
    loggers = [a for a in alts if re.search(r"\?P<(?:glog|glog_nt|vllm|nemo|pylog|raycc|sgl|hf|titan)>", a)]
    body = "".join(rx for _name, rx in JOB_LABELS) + "(?:" + "|".join(loggers) + ")?"
    return re.sub(r"\(\?P<\w+>", "(?:", body)


def _split(raw: pl.Expr, head_re: str, fields: tuple[str, ...]) -> pl.Expr:
    dtype = pl.Struct({f: pl.String for f in fields})
    return raw.map_batches(lambda s: _split_series(s, head_re, fields), return_dtype=dtype)


#: the NVIDIA kernel module's message prefix, read as a syslog tag where the line lost its own
KERNEL_SUBSYSTEM_TAG = "NVRM:"
#: rows in each of the blocks that judge whether a column's prefixes repeat (a flood), and blocks
REPEAT_BLOCK, REPEAT_BLOCKS = 128, 8


def _split_series(raw: pl.Series, head_re: str, fields: tuple[str, ...]) -> pl.Series:
    """The prefix fields of every line; where prefixes repeat (a flood: many lines a second
    from one writer) the capturing regex runs once per distinct prefix, found without captures."""
    d = pl.DataFrame({"raw": raw.cast(pl.String)})
    r = pl.col("raw")
    if _repeating(d["raw"], head_re):
        d = d.with_columns(_h=_head(r, head_re))
        distinct = d.select("_h").unique("_h").with_columns(_g=pl.col("_h").str.extract_groups(head_re))
        groups = d.join(distinct, on="_h", how="left", maintain_order="left", nulls_equal=True)["_g"]
    else:
        groups = d.select(_g=r.str.extract_groups(head_re))["_g"]
    g = pl.DataFrame({"raw": d["raw"], "_g": groups})
    msg = r.str.slice(pl.col("_g").struct.field("_head").str.len_chars())
    cols = {n: pl.col("_g").struct.field(n) for n in fields if n != "msg"}
    if "tag_bsd" in cols:
        # a kernel line whose "kernel:" tag was cut ("Sep 18 20:07:01 NVRM: Xid ..."): NVRM: is message
        nvrm = cols["tag_bsd"] == KERNEL_SUBSYSTEM_TAG
        msg = pl.when(nvrm).then(pl.concat_str(pl.lit(KERNEL_SUBSYSTEM_TAG + " "), msg)).otherwise(msg)
        cols["tag_bsd"] = pl.when(~nvrm).then(cols["tag_bsd"])
    cols["msg"] = msg
    return g.select(p=pl.struct([cols[n].alias(n) for n in fields]))["p"].alias(raw.name)


@functools.cache
def _capture_free(head_re: str) -> str:
    """``head_re`` without its named groups: the regex engine finds its matches far faster."""
    return re.sub(r"\(\?P<\w+>", "(?:", head_re)


def _head(raw: pl.Expr, head_re: str) -> pl.Expr:
    """The prefix ``head_re`` matches at the start of each line, found without captures."""
    return raw.str.slice(0, raw.str.len_chars() - raw.str.replace(_capture_free(head_re), "").str.len_chars())


def _repeating(raw: pl.Series, head_re: str) -> bool:
    """Whether blocks of consecutive lines spread over the column mostly share their prefixes."""
    n = len(raw)
    if n < 4 * REPEAT_BLOCK * REPEAT_BLOCKS:
        return False
    step = n // REPEAT_BLOCKS
    sample = pl.DataFrame({"raw": pl.concat([raw.slice(i * step, REPEAT_BLOCK) for i in range(REPEAT_BLOCKS)])})
    return sample.select(_head(pl.col("raw"), head_re).n_unique()).item() <= sample.height // 2


def split_prefix(raw: pl.Expr, job: bool = False) -> pl.Expr:
    """Struct of the prefix fields and the message of each line; ``job``: the lines are job
    output, whose launcher labels are read first (and ``JOB_FIELDS`` added)."""
    if not job:
        return _split(raw, _HEAD_RE, PREFIX_FIELDS)
    return raw.map_batches(_split_job, return_dtype=_JOB_STRUCT)


_JOB_STRUCT = pl.Struct({f: pl.String for f in JOB_PREFIX_FIELDS + JOB_FIELDS})


def _split_job(raw: pl.Series) -> pl.Series:
    # in steps: as one nested expression polars evaluates the label regex once per field
    lab = (
        pl.DataFrame({"raw": raw.cast(pl.String)}).select(pl.col("raw").str.extract_groups(JOB_LABEL_RE)).unnest("raw")
    )
    p = lab.select(p=_split(pl.col("rest"), _JOB_HEAD_RE, JOB_PREFIX_FIELDS)).unnest("p")
    p = p.with_columns(msg=pl.concat_str([lab["stepd"].fill_null(""), p["msg"]]))
    return pl.concat([p, lab.select(JOB_FIELDS)], how="horizontal").to_struct(raw.name)


def _month_expr(name: pl.Expr) -> pl.Expr:
    key = name.str.to_lowercase().str.strip_chars(".")
    numbered = key.str.extract(r"^(\d{1,2})[月월]$", 1).cast(pl.Int32, strict=False)  # CJK: 11月, 11월
    return pl.coalesce(key.replace_strict(MONTHS, default=None, return_dtype=pl.Int32), numbered)


def _year_for(month: pl.Expr, ref: pl.Expr) -> pl.Expr:
    """Year of a year-less stamp, from the partition date ``ref``, with the Dec/Jan rollover."""
    y, m = ref.dt.year(), ref.dt.month()
    return pl.when((m == 1) & (month == 12)).then(y - 1).when((m == 12) & (month == 1)).then(y + 1).otherwise(y)


def _from_parts(year, month, day, hms: pl.Expr) -> pl.Expr:
    text = pl.format("{}-{}-{} {}", year, month, day, hms)
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us", time_zone="UTC")


#: prefix fields a wall-clock stamp is read from
_NOT_STAMP = {"msg", "rank_label", "srun_label", "pdsh", "kmsg_pri", "kmsg_us", "mono", "rel", "inner_mono", "glog_lvl"}
_NOT_STAMP |= {
    f
    for f in JOB_ONLY_FIELDS
    if f not in ("lead_z", "lead_zs", "lead_n", "lead_c", "sgl", "raycc", "nemo", "hf", "titan", "tc", "vllm", "hfus")
}
STAMP_FIELDS = tuple(
    f for f in PREFIX_FIELDS + JOB_ONLY_FIELDS if f not in _NOT_STAMP and not f.startswith(("host", "tag"))
)
MAX_MONO_SECONDS = 1e10  # seconds since boot beyond this (~317 years) are malformed
_TS_MIN = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_TS_MAX = dt.datetime(9000, 1, 1, tzinfo=dt.timezone.utc)


def _sane(ts: pl.Expr) -> pl.Expr:
    """``ts`` where it lies in 1970-9000 (UTC), else null (an absurd or overflowed stamp)."""
    lo, hi = pl.lit(_TS_MIN, pl.Datetime("us", "UTC")), pl.lit(_TS_MAX, pl.Datetime("us", "UTC"))
    return pl.when((ts >= lo) & (ts < hi)).then(ts)


def derive_timestamps(
    p: pl.DataFrame,
    ref_date: dt.date | None = None,
    boots: list[dt.datetime] | None = None,
    boots_by_file: dict[int, list[dt.datetime]] | None = None,
) -> pl.DataFrame:
    """Add ``ts`` (UTC) and ``ts_source`` to a frame of prefix fields (see ``split_prefix``).
    Frames of many files carry ``_ref_date`` (per row), ``_file`` and ``boots_by_file``;
    single-file callers pass ``ref_date`` and ``boots``."""
    p = with_job_fields(p)
    if "_ref_date" not in p.columns:
        p = p.with_columns(_ref_date=pl.lit(ref_date or dt.datetime.now(dt.timezone.utc).date(), pl.Date))
    if "_file" not in p.columns:
        p = p.with_columns(_file=pl.lit(0, pl.Int32))
    # only the stamp formats these lines hold are parsed: the others are null literals
    present = {f for f in p.columns if p[f].dtype == pl.String and p[f].null_count() < p.height}

    def c(name: str) -> pl.Expr:
        return pl.col(name) if name in present else pl.lit(None, pl.String)

    ref = pl.col("_ref_date")
    zoned = pl.coalesce(
        c("iso5424"),
        c("iso"),
        c("diso"),
        c("talos"),
        c("mmfs").str.replace("_", "T", literal=True),
        c("lead_z"),
        c("lead_zs").str.replace(" ", "T", literal=True).str.replace(r" ([+-])", "$1"),
        c("tc"),
    )
    zoned = (
        zoned.str.replace(",", ".", literal=True)
        .str.replace(r"Z$", "+00:00")
        .str.replace(r"([+-]\d\d)(\d\d)$", "$1:$2")
    )
    abs_ts = zoned.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us").dt.convert_time_zone("UTC")
    naive_txt = pl.coalesce(
        c("slurm").str.replace("T", " ", literal=True),
        pl.coalesce(c("pylog"), c("lead_n"), c("sgl"), c("raycc"), c("nemo"), c("hf"), c("titan"))
        .str.replace(",", ".", literal=True)
        .str.replace("T", " ", literal=True)
        .str.replace_all("/", "-", literal=True),
        # RFC 3339 without a zone: the zoned parse above leaves it
        c("iso").str.replace("T", " ", literal=True),
    )
    naive_ts = naive_txt.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us", time_zone="UTC")
    ctime_parts = pl.coalesce(c("ctime"), c("lead_c")).str.extract_groups(
        r"^\S+ (?P<m>\S+)\s+(?P<d>\d+) (?P<t>\S+) (?P<y>\d{4})$"
    )
    ctime_m = _month_expr(ctime_parts.struct.field("m"))
    ctime_ts = _from_parts(
        ctime_parts.struct.field("y"), ctime_m, ctime_parts.struct.field("d"), ctime_parts.struct.field("t")
    )
    fm_ts = c("fm").str.to_datetime("%b %d %Y %H:%M:%S", strict=False, time_unit="us", time_zone="UTC")
    hfus_ts = c("hfus").str.to_datetime("%m/%d/%Y %H:%M:%S", strict=False, time_unit="us", time_zone="UTC")

    bsd_parts = c("bsd").str.extract_groups(r"^(?P<m>\S+)\s+(?P<d>\d+)\s+(?P<t>\S+)$")
    bsd_m = _month_expr(bsd_parts.struct.field("m"))
    bsd_ts = _from_parts(_year_for(bsd_m, ref), bsd_m, bsd_parts.struct.field("d"), bsd_parts.struct.field("t"))
    glog = c("glog").str.extract_groups(r"^(?P<m>\d{1,2})(?P<d>\d\d) (?P<t>\S+)$")
    glog_m = glog.struct.field("m").cast(pl.Int32, strict=False)
    glog_ts = _from_parts(
        _year_for(glog_m, ref), glog_m, glog.struct.field("d").cast(pl.Int32, strict=False), glog.struct.field("t")
    )
    vllm_m = c("vllm").str.slice(0, 2).cast(pl.Int32, strict=False)
    vllm_ts = _from_parts(
        _year_for(vllm_m, ref), vllm_m, c("vllm").str.slice(3, 2).cast(pl.Int32, strict=False), c("vllm").str.slice(6)
    )
    h_m = _month_expr(c("hmon"))
    h_ts = _from_parts(_year_for(h_m, ref), h_m, c("hday"), pl.format("{}:00", c("htime")))

    mono = pl.coalesce(c("mono").cast(pl.Float64, strict=False), c("kmsg_us").cast(pl.Float64, strict=False) / 1e6)
    # malformed stamps (seconds since boot beyond ~300 years, times outside 1970-9000) are
    # no time at all: nulled here, they never overflow the casts below or Python datetimes
    mono = pl.when(mono <= MAX_MONO_SECONDS).then(mono)
    # wall-clock stamps repeat (many lines a second, the same second on every node): each
    # distinct stamp is parsed once
    fields = [f for f in STAMP_FIELDS if f in p.columns]
    key = pl.concat_str([c(f).fill_null("\x00") for f in fields] + [ref.cast(pl.String)], separator="\x1f")
    p = p.with_columns(_skey=key, _mono=mono)
    parsed = (
        p.select("_skey", *fields, "_ref_date")
        .unique("_skey")
        .select(
            "_skey",
            _abs=_sane(abs_ts),
            _naive=_sane(pl.coalesce(naive_ts, ctime_ts, fm_ts, hfus_ts)),
            _yearless=_sane(pl.coalesce(bsd_ts, glog_ts, vllm_ts, h_ts)),
        )
    )
    p = p.join(parsed, on="_skey", how="left", maintain_order="left").drop("_skey")
    p = attach_boots(p, boots_by_file if boots_by_file is not None else ({0: boots} if boots else None))
    boot_ts = _sane(pl.col("_boot") + pl.duration(microseconds=(pl.col("_mono") * 1e6).round(0).cast(pl.Int64)))
    ts = pl.coalesce(pl.col("_abs"), pl.col("_naive"), pl.col("_yearless"), boot_ts)
    src = (
        pl.when(pl.col("_abs").is_not_null())
        .then(pl.lit("absolute"))
        .when(pl.col("_naive").is_not_null())
        .then(pl.lit("naive_utc"))
        .when(pl.col("_yearless").is_not_null())
        .then(pl.lit("yearless"))
        .when(boot_ts.is_not_null())
        .then(pl.lit("boot_offset"))
        .when(pl.col("_mono").is_not_null())
        .then(pl.lit("no_boot_time"))
        .otherwise(pl.lit("none"))
    )
    return p.with_columns(ts=ts, ts_source=src).drop("_abs", "_naive", "_yearless", "_mono", "_boot")


def with_job_fields(p: pl.DataFrame) -> pl.DataFrame:
    """``p`` with the job-only prefix fields it lacks as nulls (lines other than job output)."""
    missing = [f for f in JOB_ONLY_FIELDS if f not in p.columns]
    return p.with_columns([pl.lit(None, pl.String).alias(f) for f in missing]) if missing else p


def attach_boots(p: pl.DataFrame, boots_by_file: dict[int, list[dt.datetime]] | None) -> pl.DataFrame:
    """Boot time (``_boot``) of every monotonic stamp; a drop in the counter means a reboot. The
    last boot segment of a file takes its last known boot, the one before it the boot before
    that (a day's log ends in the boot that is running)."""
    rows = [
        (f, i, b if b.tzinfo else b.replace(tzinfo=dt.timezone.utc), len(bs))
        for f, bs in (boots_by_file or {}).items()
        for i, b in enumerate(sorted(bs))
    ]
    if not rows:
        return p.with_columns(_boot=pl.lit(None, pl.Datetime("us", "UTC")))
    table = pl.DataFrame(
        rows,
        schema={"_file": pl.Int32, "_bidx": pl.Int64, "_boot": pl.Datetime("us", "UTC"), "_nboots": pl.Int64},
        orient="row",
    )
    filled = pl.col("_mono").fill_null(strategy="forward").over("_file")
    seg = (filled < filled.shift(1).over("_file")).fill_null(False).cast(pl.Int64).cum_sum().over("_file")
    p = p.with_columns(_seg=seg).with_columns(_last=pl.col("_seg").max().over("_file"))
    nb = table.group_by("_file").agg(pl.col("_nboots").first())
    p = (
        p.with_columns(pl.col("_file").cast(pl.Int32))
        .join(nb, on="_file", how="left")
        .with_columns(
            _bidx=pl.when(pl.col("_mono").is_not_null()).then(
                pl.col("_nboots") - 1 - (pl.col("_last") - pl.col("_seg"))
            )
        )
    )
    p = p.join(table.select("_file", "_bidx", "_boot"), on=["_file", "_bidx"], how="left", maintain_order="left")
    return p.drop("_seg", "_last", "_nboots", "_bidx")
