"""Vectorized rule classification of messages (polars), Xid catalog lookup, templates. Only
lines holding a rule keyword or error word (the prefilter) reach the rules; the rest is benign,
which the rule-data tests guarantee (docs/architecture.md, "The parse hot path")."""

from __future__ import annotations

import polars as pl

from .ruleset import GROUP_NAMES, SUBJECT_GROUP, RuleSet

INT_GROUPS = {"xid", "sxid", "caused_by_xid", "rank", "cuda_dev"}
# How specific a category is as evidence, lower wins inside a joined multi-line event.
_SYMPTOMS = ("collective_timeout", "scheduler")

_RECOVERY_ACTIONS = {
    "none": "none",
    "drain p2p": "drain_node",
    "drain and reset": "drain_node",
    "gpu reset required": "reset_gpu",
    "node reboot required": "reboot_node",
}

# Masks, in order: what varies between two lines of one kind (ids, addresses, host names,
# ranks, numbers) becomes a placeholder, so the lines share a template.
_HEX = "0-9a-fA-F"
_MASKS = [
    (rf"(?:GPU-)?[{_HEX}]{{8}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{12}}\b", "<UUID>"),
    (r"(?i)\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?\b", "<PCI>"),
    (r"(?i)\b[0-9a-f]{2}(?::[0-9a-f]{2}){5}\b", "<MAC>"),
    (r"(?i)\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b|\bfe80::[0-9a-f:]*[0-9a-f]\b", "<IP>"),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}(?:<\d+>|:\d+)?", "<IP>"),
    (r"(?i)\b0x[0-9a-f_]+\b", "<HEX>"),
    (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?", "<TS>"),
    # host names where the line's grammar says so (Slurm, torchrun, slurmstepd) ...
    (r"(srun: error: )[^\s:]+(:)", "${1}<NODE>${2}"),
    (r"(\*\*\* (?:JOB|STEP) \S+ ON )\S+", "${1}<NODE>"),
    (r"(?i)(\bhost(?:name)?\s*[:=]\s*)[A-Za-z][\w.-]*", "${1}<NODE>"),
    (r"(?i)(\bnode(?:name)?=|\bnodes? )[A-Za-z][\w.-]*\d[\w.-]*", "${1}<NODE>"),
    # ... device names that look like host names are kept (the joiner U+E000 hides their "-") ...
    (r"(?i)\b(nvidia)-(nvswitch)", "${1}\ue000${2}"),
    (r"(?i)\b(dm|md|i2c|utf|x86|iso|ucs|cp|e[357]|loop|nbd|zram|tty[a-z]*)-(\d)", "${1}\ue000${2}"),
    # ... and name-N, name-rNN-nNN, ip-10-0-0-1, css2-g55-001 anywhere but in a path
    (r"(^|[^\w/.-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-[A-Za-z0-9]*\d(?:\.[A-Za-z][\w-]*)*\b", "${1}<NODE>"),
    ("\ue000", "-"),
    (r"(?i)\b(rank|local_rank|global_rank|task|worker|proc|default)\d+\b", "${1}<NUM>"),
    (r"\b\d{8,}\b", "<NUM>"),
    (r"(?i)\b[0-9a-f]{8,}\b", "<HEX>"),
    (r"\b\d+(?:\.\d+)?\b", "<NUM>"),
]


def mask_template(msg: pl.Expr) -> pl.Expr:
    """The message with ids, addresses, host names, ranks and numbers masked (``_MASKS``):
    lines of one kind share this template, the model reads it and signatures group by it."""
    out = msg
    for pattern, repl in _MASKS:
        out = out.str.replace_all(pattern, repl)
    return out.str.slice(0, 400)


def normalize_pci(expr: pl.Expr) -> pl.Expr:
    """``PCI:0000:3B:00.0`` / ``00000000:3b:00.0`` / ``3b:00`` → ``0000:3b:00``."""
    s = expr.str.to_lowercase().str.extract(r"((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2})", 1)
    s = s.str.replace(r"^[0-9a-f]*([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})$", "$1")
    return pl.when(s.str.len_bytes() == 5).then(pl.lit("0000:") + s).otherwise(s)


class Verdicts:
    """Verdicts already reached, by message (a verdict depends on the message alone), so that a
    partition parsed in chunks classifies each distinct message once. Past ``max_rows``
    messages it keeps only the last chunk's."""

    def __init__(self, max_rows: int = 250_000):
        self.max_rows = max_rows
        self._known: dict[bool, pl.DataFrame] = {}

    def of(self, msgs: pl.Series, rs: RuleSet, every_line: bool) -> pl.DataFrame:
        """``_classify_distinct`` of the distinct ``msgs`` with their message as ``_msg``; rows of
        other messages may come too."""
        seen = self._known.get(every_line)
        todo = pl.DataFrame({"_msg": msgs})
        if seen is not None:
            todo = todo.join(seen.select("_msg"), on="_msg", how="anti", nulls_equal=True)
        if seen is None or todo.height:
            got = _classify_distinct(todo["_msg"], rs, every_line).with_columns(_msg=todo["_msg"])
            seen = got if seen is None else pl.concat([seen, got])
        if seen.height > self.max_rows:
            seen = seen.join(pl.DataFrame({"_msg": msgs}), on="_msg", how="semi", nulls_equal=True)
        self._known[every_line] = seen
        return seen


def classify_messages(
    msgs: pl.Series, rs: RuleSet, every_line: bool = False, known: Verdicts | None = None
) -> pl.DataFrame:
    """Classify each message; one row per input: ``cand`` (passed the prefilter), ``rule_idx`` (null:
    no rule), ``family``, ``category``, ``severity``, ``action``, ``rule_id``, ``continues``, ``joins_any``,
    ``opens``, ``keep`` and the rules' named groups. ``every_line``: rules also try lines the prefilter
    drops; ``known``: verdicts of earlier calls to reuse (and add to)."""
    frame = pl.DataFrame({"msg": msgs.cast(pl.String)})
    uniq = frame.unique("msg", maintain_order=True)
    if known is not None:
        res = known.of(uniq["msg"], rs, every_line)
    elif uniq.height == frame.height:
        return _classify_distinct(frame["msg"], rs, every_line)
    else:
        # a verdict depends on the message alone: floods repeat few messages many times
        res = _classify_distinct(uniq["msg"], rs, every_line).with_columns(_msg=uniq["msg"])
    return frame.join(res, left_on="msg", right_on="_msg", how="left", maintain_order="left", nulls_equal=True).drop(
        "msg"
    )


def _classify_distinct(msgs: pl.Series, rs: RuleSet, every_line: bool = False) -> pl.DataFrame:
    n = len(msgs)
    base = pl.DataFrame({"msg": msgs}).with_row_index("_row")
    cand = base if every_line else base.filter(pl.col("msg").str.contains(rs.prefilter))
    out = _classify_candidates(cand, rs)
    full = base.select("_row").join(out, on="_row", how="left").sort("_row")
    passed = msgs.cast(pl.String).str.contains(rs.prefilter) if every_line else pl.col("cand").fill_null(False)
    return (
        full.with_columns(
            cand=passed,
            category=pl.col("category").fill_null("benign"),
            severity=pl.col("severity").fill_null("info"),
            action=pl.col("action").fill_null("none"),
            continues=pl.col("continues").fill_null(False),
            joins_any=pl.col("joins_any").fill_null(False),
            opens=pl.col("opens").fill_null(False),
            keep=pl.col("keep").fill_null(False),
        ).drop("_row")
        if n
        else _empty_result()
    )


def _empty_result() -> pl.DataFrame:
    cols = {
        "cand": pl.Boolean,
        "rule_idx": pl.Int32,
        "family": pl.String,
        "category": pl.String,
        "severity": pl.String,
        "action": pl.String,
        "rule_id": pl.String,
        "continues": pl.Boolean,
        "joins_any": pl.Boolean,
        "opens": pl.Boolean,
        "keep": pl.Boolean,
    }
    cols.update({g: (pl.Int32 if g in INT_GROUPS else pl.String) for g in GROUP_NAMES})
    return pl.DataFrame(schema=cols)


def first_rule_chain(msgs: pl.Series, rs: RuleSet) -> pl.Series:
    """The index of the first rule whose pattern matches each message (null: none): every
    pattern over every message. The reference for ``first_rule``."""
    m = pl.col("msg")
    chain = pl.when(m.str.contains(rs.rules[0].pattern)).then(pl.lit(0, pl.Int32))
    for i, r in enumerate(rs.rules[1:], start=1):
        chain = chain.when(m.str.contains(r.pattern)).then(pl.lit(i, pl.Int32))
    return pl.DataFrame({"msg": msgs}).select(rule_idx=chain.otherwise(pl.lit(None, pl.Int32)))["rule_idx"]


def first_rule(msgs: pl.Series, rs: RuleSet) -> pl.Series:
    """``first_rule_chain``, trying each rule only on the messages holding one of its keywords
    (the rule data's contract): one Aho-Corasick pass finds every message's keywords, so each
    pattern runs on its share of the lines instead of every pattern on every line."""
    keys = rs.keyword_rules
    found = msgs.str.extract_many(list(keys), overlapping=True)
    pairs = (
        pl.DataFrame({"_row": pl.int_range(len(msgs), dtype=pl.Int64, eager=True), "kw": found})
        .explode("kw")
        .drop_nulls("kw")
        .join(
            pl.DataFrame(
                {"kw": list(keys), "rule_idx": [list(v) for v in keys.values()]},
                schema={"kw": pl.String, "rule_idx": pl.List(pl.Int32)},
            ),
            on="kw",
        )
        .explode("rule_idx")
        .select("_row", "rule_idx")
        .unique(maintain_order=True)
    )
    hits = [pl.DataFrame(schema={"_row": pl.Int64, "rule_idx": pl.Int32})]
    for (idx,), part in pairs.partition_by("rule_idx", as_dict=True).items():
        ok = msgs.gather(part["_row"]).str.contains(rs.rules[idx].pattern)
        hits.append(part.filter(ok))
    best = pl.concat(hits).group_by("_row").agg(pl.col("rule_idx").min())
    return pl.DataFrame({"_row": pl.int_range(len(msgs), dtype=pl.Int64, eager=True)}).join(
        best, on="_row", how="left", maintain_order="left"
    )["rule_idx"]


def _classify_candidates(cand: pl.DataFrame, rs: RuleSet) -> pl.DataFrame:
    rules = rs.rules
    if cand.height:
        cand = cand.with_columns(rule_idx=first_rule(cand["msg"], rs))
    else:
        cand = cand.with_columns(rule_idx=pl.lit(None, pl.Int32))
    group_schema = {g: pl.String for g in GROUP_NAMES}
    placed_cols = ("_pcat", "_pfam", "_pact")
    # rows of rules without named groups (most rules) take null groups in one go; only the
    # others are split by rule for their extraction
    extracting = [i for i, r in enumerate(rules) if r.groups or r.placed]
    by_rule = pl.col("rule_idx").is_in(extracting).fill_null(False)
    plain = cand.filter(~by_rule).with_columns(
        [pl.lit(None, pl.String).alias(c) for c in (*group_schema, *placed_cols)]
    )
    parts = [plain]
    for (idx,), part in cand.filter(by_rule).partition_by("rule_idx", as_dict=True, maintain_order=True).items():
        ext = part["msg"].str.extract_groups(rules[idx].pattern).struct.unnest()
        cols = {g: ext[g] for g in rules[idx].groups}
        part = part.with_columns(
            [(pl.Series(g, cols[g]) if g in cols else pl.lit(None, pl.String).alias(g)) for g in group_schema]
        )
        if rules[idx].placed:
            part = part.with_columns(_place(pl.lit(ext[SUBJECT_GROUP]), rs))
        else:
            part = part.with_columns([pl.lit(None, pl.String).alias(c) for c in placed_cols])
        parts.append(part)
    cand = pl.concat(parts)
    cand = cand.with_columns([pl.col(g).cast(pl.Int32, strict=False) for g in INT_GROUPS])
    cand = cand.with_columns(gpu_pci=normalize_pci(pl.col("gpu_pci")))

    meta = pl.DataFrame(
        {
            "rule_idx": pl.Series(range(len(rules)), dtype=pl.Int32),
            "rule_id": [r.id for r in rules],
            "family": [r.family for r in rules],
            "_rcat": [r.category for r in rules],
            "_rsev": [r.severity for r in rules],
            "_ract": [r.action for r in rules],
            "continues": [r.continues for r in rules],
            "joins_any": [r.joins_any for r in rules],
            "opens": [r.opens for r in rules],
            "keep": [r.keep for r in rules],
        }
    )
    cat = rs.xid_catalog.select(
        pl.col("xid").cast(pl.Int32),
        pl.col("category").alias("_xcat"),
        pl.col("severity").alias("_xsev"),
        pl.col("action").alias("_xact"),
    )
    cause = cat.select(pl.col("xid").alias("caused_by_xid"), pl.col("_xcat").alias("_ccat"))
    cand = (
        cand.join(meta, on="rule_idx", how="left")
        .join(cat, on="xid", how="left")
        .join(cause, on="caused_by_xid", how="left")
        .with_columns(
            _rcat=pl.coalesce("_pcat", "_rcat"),
            family=pl.coalesce("_pfam", "family"),
            _ract=pl.coalesce("_pact", "_ract"),
        )
        .drop(placed_cols)
    )

    from_xid = pl.col("_rcat") == "from_xid"
    # Xid 45 names its cause: it takes that cause's category unless the cause is the app.
    xcat = (
        pl.when(pl.col("_ccat").is_not_null() & (pl.col("_ccat") != "user_app"))
        .then(pl.col("_ccat"))
        .otherwise(pl.col("_xcat"))
    )
    rec = pl.col("recovery_action").str.to_lowercase().str.strip_chars().replace_strict(_RECOVERY_ACTIONS, default=None)
    is_err = pl.col("msg").str.contains(rs.error_regex) if rs.error_words else pl.lit(False)
    if rs.benign_despite:
        is_err = is_err & ~pl.col("msg").str.contains_any(list(rs.benign_despite))
    cand = _fall_back(cand.with_columns(_err=is_err), rs)
    is_err = pl.col("_err")
    matched = pl.col("rule_idx").is_not_null()
    fell = is_err & pl.col("_fcat").is_not_null()
    category = (
        pl.when(from_xid)
        .then(pl.coalesce(xcat, pl.lit("unknown")))
        .when(pl.col("_rcat") == "from_sxid")
        .then(pl.lit("nvlink"))
        .when(matched)
        .then(pl.col("_rcat"))
        .when(fell)
        .then(pl.col("_fcat"))
        .when(is_err)
        .then(pl.lit("unknown"))
        .otherwise(pl.lit("benign"))
    )
    severity = (
        pl.when(from_xid)
        .then(pl.coalesce(pl.col("_rsev"), pl.col("_xsev"), pl.lit("error")))
        .when(matched)
        .then(
            pl.coalesce(
                pl.col("_rsev"), pl.when(pl.col("_rcat") == "benign").then(pl.lit("info")).otherwise(pl.lit("error"))
            )
        )
        .when(is_err & (pl.col("_fcat") != "benign").fill_null(True))
        .then(pl.lit("warning"))
        .otherwise(pl.lit("info"))
    )
    action = (
        pl.when(pl.col("recovery_action").is_not_null() & rec.is_not_null())
        .then(rec)
        .when(from_xid)
        .then(pl.coalesce(pl.col("_ract"), pl.col("_xact"), pl.lit("none")))
        .when(matched)
        .then(pl.coalesce(pl.col("_ract"), pl.lit("none")))
        .when(fell)
        .then(pl.coalesce(pl.col("_fact"), pl.lit("none")))
        .otherwise(pl.lit("none"))
    )
    return cand.with_columns(
        cand=pl.lit(True),
        category=category,
        severity=severity,
        action=action,
        family=pl.when(matched).then(pl.col("family")).when(fell).then(pl.col("_ffam")),
        rule_id=pl.when(matched)
        .then(pl.col("rule_id"))
        .when(fell)
        .then(pl.lit("fallback:") + pl.col("_fid"))
        .when(is_err)
        .then(pl.lit("error_words")),
    ).drop("msg", "_rcat", "_rsev", "_ract", "_xcat", "_xsev", "_xact", "_ccat", "_err", *_FALLBACK_COLS)


_FALLBACK_COLS = ("_fid", "_fcat", "_ffam", "_fact")
# a snake_case name holding a lower-case letter (error codes such as CUDA_ERROR_X are kept)
_SNAKE = r"\b[A-Za-z0-9]*[a-z][A-Za-z0-9]*_\w*|\b\w*_[A-Za-z0-9]*[a-z]\w*"


def _fall_back(cand: pl.DataFrame, rs: RuleSet) -> pl.DataFrame:
    """The first models/fallback.yaml entry each unmatched error-word line contains (its name,
    category, family, action; null: none), tried on those lines alone."""
    todo = cand.filter(pl.col("rule_idx").is_null() & pl.col("_err")).select("_row", "msg")
    # error words only inside a snake_case name (has_simulated_crash_happened, train/class_error)
    # say nothing: such a line is benign
    named = ~pl.col("msg").str.replace_all(_SNAKE, " ").str.contains(rs.error_regex)
    first = pl.lit(None, pl.Int32)
    for i, e in reversed(list(enumerate(rs.fallback))):
        first = pl.when(pl.col("msg").str.contains(e.pattern)).then(pl.lit(i, pl.Int32)).otherwise(first)
    first = pl.when(named).then(pl.lit(-1, pl.Int32)).otherwise(first)
    entries = pl.DataFrame(
        {
            "_fi": pl.Series([-1, *range(len(rs.fallback))], dtype=pl.Int32),
            "_fid": ["identifier", *(e.name for e in rs.fallback)],
            "_fcat": ["benign", *(e.category for e in rs.fallback)],
            "_ffam": [None, *(e.family for e in rs.fallback)],
            "_fact": [None, *(e.action for e in rs.fallback)],
        },
        schema={"_fi": pl.Int32, **dict.fromkeys(_FALLBACK_COLS, pl.String)},
    )
    found = todo.select("_row", _fi=first).join(entries, on="_fi", how="left").drop("_fi")
    return cand.join(found, on="_row", how="left")


def _place(subj: pl.Expr, rs: RuleSet) -> list[pl.Expr]:
    """Category, family and action of the first subsystem whose pattern the subject contains
    (null where none does: the rule's own stand)."""
    out = []
    for col, attr in (("_pcat", "category"), ("_pfam", "family"), ("_pact", "action")):
        expr = pl.lit(None, pl.String)
        for e in reversed(rs.subsystems):
            expr = pl.when(subj.str.contains(e.pattern)).then(pl.lit(getattr(e, attr), pl.String)).otherwise(expr)
        out.append(expr.alias(col))
    return out


def evidence_rank(category: pl.Expr, rule_idx: pl.Expr) -> pl.Expr:
    """Sort key for the line that speaks for a joined event: specific faults first."""
    tier = (
        pl.when(category == "benign")
        .then(4)
        .when(category == "unknown")
        .then(3)
        .when(category.is_in(_SYMPTOMS))
        .then(2)
        .otherwise(1)
    )
    return tier * 100_000 + rule_idx.fill_null(99_999)
