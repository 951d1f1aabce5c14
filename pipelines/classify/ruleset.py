"""Load the versioned rule data shipped in ``faultline.models`` (never paths into the repo)."""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

import polars as pl
import yaml

GROUP_NAMES = (
    "gpu_pci",
    "gpu_uuid",
    "gpu_serial",
    "xid",
    "sxid",
    "caused_by_xid",
    "nccl_status",
    "rank",
    "node",
    "job_id",
    "cuda_dev",
    "recovery_action",
)
SPECIAL_CATEGORIES = ("from_xid", "from_sxid")
JOB_FAMILIES = ("nccl", "pytorch", "cuda", "slurm")  # rule families of job output
#: what a marker rule (``marker: ...``: models/rules/progress.yaml, and nccl.yaml's rank lines)
#: says a line is, and the named groups only such rules may capture (kept in the lake's
#: job_markers table); ``rank``: an NCCL line that ties its process (host, pid) to its rank
MARKERS = ("checkpoint_save", "checkpoint_load", "progress", "rank")
MARKER_GROUPS = ("step", "path", "tokens_per_s", "samples_per_s", "host", "pid", "rank", "nranks", "cuda_dev")
#: the group a placed rule (``placed: true``) captures: what its line names (task, path, module),
#: which models/subsystems.yaml turns into a category
SUBJECT_GROUP = "subject"


@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    pattern: str
    category: str
    severity: str | None
    action: str | None
    keywords: tuple[str, ...]
    continues: bool
    joins_any: bool  # a continuation that joins the event above whatever its family (dump lines)
    opens: bool  # a header: the next line of its family joins it (GPU identity before an Xid)
    keep: bool
    groups: tuple[str, ...]  # named groups of GROUP_NAMES
    marker: str | None = None  # one of MARKERS: the line is training progress or a checkpoint
    marker_groups: tuple[str, ...] = ()  # named groups of MARKER_GROUPS
    placed: bool = False  # the subject group's subsystem (``RuleSet.subsystems``) decides the category


@dataclass(frozen=True)
class Subsystem:
    """One entry of models/subsystems.yaml: a subject containing ``pattern`` belongs here."""

    name: str
    pattern: str
    category: str
    family: str
    action: str | None  # None: the rule's own


@dataclass(frozen=True)
class Fallback:
    """One entry of models/fallback.yaml: an unmatched error-word line containing ``pattern`` is
    benign (``category`` benign) or belongs to the subsystem it names."""

    name: str
    pattern: str
    category: str
    family: str | None
    action: str | None


@dataclass(frozen=True)
class Taxonomy:
    domains: dict[str, str]  # category -> domain
    actions: tuple[str, ...]
    severities: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class RuleSet:
    rules: tuple[Rule, ...]
    taxonomy: Taxonomy
    xid_catalog: pl.DataFrame
    error_words: tuple[str, ...]  # case-sensitive literal variants
    benign_despite: tuple[str, ...]
    version: str  # content hash of all rule data
    subsystems: tuple[Subsystem, ...] = ()  # in order: where a placed rule's subject belongs
    fallback: tuple[Fallback, ...] = ()  # in order: what an unmatched error-word line is
    marker_kinds: tuple[str, ...] = MARKERS  # the markers the marker pass reads (diagnose: rank lines)

    @cached_property
    def prefilter_literals(self) -> tuple[str, ...]:
        """The literals of the prefilter: a line containing none of them can only be benign. Rules
        that only call a line benign add none (kept benign lines do add theirs), and a literal that
        contains a shorter one adds nothing."""
        lits = {k for r in self.rules if r.category != "benign" or r.keep for k in r.keywords}
        # job output's benign continuations (advice under a CUDA error, NCCL's unwind chain,
        # traceback frames) join the event above them, so they must be read too
        lits |= {k for r in self.rules if r.continues and r.family in JOB_FAMILIES for k in r.keywords}
        lits |= set(self.error_words)
        short = sorted(lits, key=len)
        return tuple(sorted(x for i, x in enumerate(short) if not any(y in x for y in short[:i])))

    @cached_property
    def keyword_rules(self) -> dict[str, tuple[int, ...]]:
        """Each rule keyword -> the indices of the rules that name it."""
        out: dict[str, list[int]] = {}
        for i, r in enumerate(self.rules):
            for k in r.keywords:
                out.setdefault(k, []).append(i)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def prefilter(self) -> str:
        """The literals as one regex (polars/Rust regex: literal alternations run as SIMD search)."""
        return "|".join(re.escape(x) for x in self.prefilter_literals)

    @cached_property
    def error_regex(self) -> str:
        return "|".join(re.escape(w) for w in self.error_words)

    @cached_property
    def markers(self) -> RuleSet:
        """The progress and checkpoint rules alone, in order: what the marker pass tries
        (``classify.markers``); their keywords are its prefilter (``marker_prefilter``)."""
        return RuleSet(
            tuple(r for r in self.rules if r.marker in self.marker_kinds),
            self.taxonomy,
            self.xid_catalog,
            (),
            (),
            self.version,
        )

    @cached_property
    def marker_prefilter(self) -> str:
        """Regex of the marker rules' keywords: a line holding none of them is no marker."""
        lits = sorted({k for r in self.rules if r.marker in self.marker_kinds for k in r.keywords})
        return "|".join(re.escape(x) for x in lits)


# libyaml's loader where PyYAML has it: the same documents, about ten times faster to read
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml(data: bytes):
    return yaml.load(data, Loader=_LOADER)


def _root(models_dir: str | None):
    return resources.files("faultline.models") if models_dir is None else Path(models_dir)


def _variants(word: str) -> list[str]:
    return sorted({word.lower(), word[:1].upper() + word[1:].lower(), word.upper()})


@lru_cache(maxsize=4)
def load_ruleset(models_dir: str | None = None) -> RuleSet:
    """The shipped rule data, or the same layout from ``models_dir`` (tests, local rules)."""
    root = _root(models_dir)

    def _read(name: str) -> bytes:
        return root.joinpath(name).read_bytes()

    digest = hashlib.sha256()
    tax = _yaml(_read("taxonomy.yaml"))
    taxonomy = Taxonomy(dict(tax["categories"]), tuple(tax["actions"]), tuple(tax["severities"]))
    rule_dir = root.joinpath("rules")
    files = []
    for entry in sorted(rule_dir.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            data = entry.read_bytes()
            digest.update(entry.name.encode() + data)
            files.append(_yaml(data))
    files.sort(key=lambda f: (f.get("priority", 100), f["family"]))
    rules = []
    for f in files:
        for r in f.get("rules", []):
            named = tuple(re.findall(r"\(\?P<(\w+)>", r["pattern"]))
            marker = r.get("marker")
            placed = bool(r.get("placed", False))
            allowed = GROUP_NAMES + (MARKER_GROUPS if marker else ()) + ((SUBJECT_GROUP,) if placed else ())
            bad = [g for g in named if g not in allowed]
            if bad:
                raise ValueError(f"rule {r['id']}: unknown named groups {bad}")
            if placed and SUBJECT_GROUP not in named:
                raise ValueError(f"rule {r['id']}: a placed rule captures (?P<{SUBJECT_GROUP}>...)")
            cat = r["category"]
            if cat not in taxonomy.domains and cat not in SPECIAL_CATEGORIES:
                raise ValueError(f"rule {r['id']}: unknown category {cat!r}")
            if marker is not None and (marker not in MARKERS or cat != "benign"):
                raise ValueError(f"rule {r['id']}: a marker is one of {MARKERS} on a benign rule")
            rules.append(
                Rule(
                    id=r["id"],
                    family=r.get("family", f["family"]),
                    pattern=r["pattern"],
                    category=cat,
                    severity=r.get("severity"),
                    action=r.get("action"),
                    keywords=tuple(r.get("keywords") or ()),
                    continues=bool(r.get("continues", False) or r.get("joins_any", False)),
                    joins_any=bool(r.get("joins_any", False)),
                    opens=bool(r.get("opens", False)),
                    keep=bool(r.get("keep", False)),
                    groups=tuple(g for g in named if g in GROUP_NAMES),
                    marker=marker,
                    marker_groups=tuple(g for g in named if g in MARKER_GROUPS) if marker else (),
                    placed=placed,
                )
            )
    cat_bytes = _read("xid_catalog.csv")
    words = _yaml(_read("error_words.yaml"))
    subs_bytes = _read("subsystems.yaml")
    fallback_bytes = _read("fallback.yaml") if root.joinpath("fallback.yaml").is_file() else b"{}"
    for blob in (cat_bytes, _read("error_words.yaml"), _read("taxonomy.yaml"), subs_bytes, fallback_bytes):
        digest.update(blob)
    subsystems = tuple(
        Subsystem(e["name"], e["pattern"], e["category"], e["family"], e.get("action"))
        for e in _yaml(subs_bytes)["subsystems"]
    )
    for e in subsystems:
        if e.category not in taxonomy.domains or e.action not in (None, *taxonomy.actions):
            raise ValueError(f"subsystems.yaml: {e.name}: unknown category or action")
    fb = _yaml(fallback_bytes)
    fallback = tuple(Fallback(e["name"], e["pattern"], "benign", None, None) for e in fb.get("benign") or ()) + tuple(
        Fallback(e["name"], e["pattern"], e["category"], e["family"], e.get("action")) for e in fb.get("subjects") or ()
    )
    for e in fallback:
        if e.category not in taxonomy.domains or e.action not in (None, *taxonomy.actions):
            raise ValueError(f"fallback.yaml: {e.name}: unknown category or action")
    catalog = pl.read_csv(io.BytesIO(cat_bytes), schema_overrides={"xid": pl.Int32})
    error_words = tuple(v for w in words.get("words", []) for v in _variants(w))
    return RuleSet(
        tuple(rules),
        taxonomy,
        catalog,
        error_words,
        tuple(words.get("benign_despite", []) or ()),
        digest.hexdigest()[:12],
        subsystems,
        fallback,
    )
