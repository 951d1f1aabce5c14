"""The classification data in models/ (line rules, Xid catalog, error words), checked with polars
alone: schema, vocabulary, that every example is claimed by its own rule under first-match-wins,
and that the real-format cases in fixtures/classify_cases.yaml resolve to what they state.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import polars as pl
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
CASES = Path(__file__).resolve().parents[1] / "fixtures" / "classify_cases.yaml"

GROUP_NAMES = {
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
}
# marker rules only (progress.yaml; nccl.yaml's rank lines)
MARKER_GROUPS = {"step", "path", "tokens_per_s", "samples_per_s", "host", "pid", "rank", "nranks", "cuda_dev"}
MARKERS = {"checkpoint_save", "checkpoint_load", "progress", "rank"}
SPECIAL_CATEGORIES = {"from_xid", "from_sxid"}
SUBJECT = "subject"  # the group a placed rule captures, looked up in models/subsystems.yaml
RULE_KEYS = {
    "id",
    "keywords",
    "pattern",
    "category",
    "severity",
    "action",
    "continues",
    "joins_any",
    "opens",
    "keep",
    "examples",
    "family",
    "marker",
    "placed",
}
FAMILIES = {
    "nvrm",
    "nvswitch",
    "nic",
    "pcie",
    "host",
    "storage",
    "thermal",
    "nccl",
    "pytorch",
    "cuda",
    "slurm",
    "boot",
    "progress",
}

# The Xid table of docs/taxonomy.md: code -> the project's category.
TAXONOMY_XIDS = {
    8: "driver_firmware",
    13: "user_app",
    31: "user_app",
    32: "gpu_hardware",
    38: "driver_firmware",
    43: "user_app",
    44: "driver_firmware",
    45: "user_app",
    46: "gpu_hardware",
    48: "gpu_memory",
    54: "thermal_power",
    61: "gpu_hardware",
    62: "gpu_hardware",
    63: "gpu_memory",
    64: "gpu_memory",
    68: "gpu_hardware",
    69: "user_app",
    74: "nvlink",
    79: "gpu_bus_lost",
    92: "gpu_memory",
    94: "gpu_memory",
    95: "gpu_memory",
    109: "gpu_hardware",
    110: "gpu_hardware",
    119: "gpu_hardware",
    120: "gpu_hardware",
    121: "nvlink",
    136: "nvlink",
    137: "user_app",
    140: "gpu_memory",
    143: "gpu_hardware",
    144: "nvlink",
    145: "nvlink",
    146: "nvlink",
    147: "nvlink",
    148: "nvlink",
    149: "nvlink",
    150: "nvlink",
    154: "gpu_hardware",
    155: "nvlink",
    158: "gpu_hardware",
}
NVLINK5_UNITS = {144: "SAW", 145: "RLW", 146: "TLW", 147: "TREX", 148: "NVLPW_CTRL", 149: "NETIR", 150: "MSE"}

TAXONOMY = yaml.safe_load((MODELS / "taxonomy.yaml").read_text())
CATEGORIES = set(TAXONOMY["categories"])
ACTIONS = set(TAXONOMY["actions"])
SEVERITIES = set(TAXONOMY["severities"])


@lru_cache(maxsize=1)
def rule_files() -> tuple[tuple[str, dict], ...]:
    """(file stem, parsed file), in the order the engine tries them: priority, then family."""
    files = [(p.stem, yaml.safe_load(p.read_text())) for p in sorted((MODELS / "rules").glob("*.yaml"))]
    return tuple(sorted(files, key=lambda f: (f[1].get("priority", 100), f[1]["family"])))


@lru_cache(maxsize=1)
def ordered_rules() -> tuple[dict, ...]:
    """Every rule, first-match-wins order, with its file's family filled in."""
    return tuple({**r, "family": r.get("family", data["family"])} for _, data in rule_files() for r in data["rules"])


def _rule_ids() -> list[str]:
    return [r["id"] for r in ordered_rules()]


RULE_BY_ID = {r["id"]: r for r in ordered_rules()}


@lru_cache(maxsize=1)
def catalog() -> pl.DataFrame:
    return pl.read_csv(MODELS / "xid_catalog.csv", schema_overrides={"xid": pl.Int32})


@lru_cache(maxsize=1)
def error_words() -> dict:
    return yaml.safe_load((MODELS / "error_words.yaml").read_text())


@lru_cache(maxsize=1)
def subsystems() -> list[dict]:
    return yaml.safe_load((MODELS / "subsystems.yaml").read_text())["subsystems"]


def placement(subject: str) -> dict | None:
    """The first subsystem entry whose pattern the subject contains, else None."""
    return next((e for e in subsystems() if pl.Series([subject]).str.contains(e["pattern"]).item()), None)


def _variants(word: str) -> set[str]:
    return {word.lower(), word[:1].upper() + word[1:].lower(), word.upper()}


def first_match(messages: list[str], only: list[int] | None = None) -> list[int | None]:
    """Index (in ordered_rules) of the first rule matching each message, as the engine decides;
    ``only``: of those rules alone."""
    if not messages:
        return []
    m = pl.col("m")
    rules = ordered_rules()
    hits = [
        pl.when(m.str.contains(rules[i]["pattern"])).then(pl.lit(i, pl.Int32))
        for i in (range(len(rules)) if only is None else only)
    ]
    return pl.DataFrame({"m": messages}).select(pl.coalesce(hits).alias("i"))["i"].to_list()


def groups_of(pattern: str, text: str) -> dict[str, str | None]:
    row = pl.Series([text]).str.extract_groups(pattern)
    fields = row.struct.fields
    return dict(zip(fields, row.struct.unnest().row(0))) if fields else {}


# ---------------------------------------------------------------------------- rule files


def test_one_file_per_family_with_header():
    stems = {stem for stem, _ in rule_files()}
    assert stems == FAMILIES
    prios = []
    for stem, data in rule_files():
        assert set(data) == {"version", "family", "priority", "rules"}, stem
        assert data["family"] == stem
        assert isinstance(data["version"], int) and data["version"] >= 1
        assert isinstance(data["priority"], int)
        assert data["rules"], stem
        prios.append(data["priority"])
    assert len(prios) == len(set(prios)), "equal priorities make the file order depend on names"


def test_rule_ids_unique_and_stable_shape():
    ids = _rule_ids()
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", i) for i in ids)


@pytest.mark.parametrize("rule_id", _rule_ids())
def test_rule_schema(rule_id):
    r = RULE_BY_ID[rule_id]
    assert set(r) <= RULE_KEYS, set(r) - RULE_KEYS
    assert r["family"] in FAMILIES
    assert isinstance(r["pattern"], str) and r["pattern"]
    assert r["category"] in CATEGORIES | SPECIAL_CATEGORIES
    if r["category"] not in SPECIAL_CATEGORIES:
        assert r.get("severity") in SEVERITIES
        assert r.get("action") in ACTIONS
    else:
        assert r.get("severity", "info") in SEVERITIES and r.get("action", "none") in ACTIONS
    assert isinstance(r.get("continues", False), bool)
    assert isinstance(r.get("joins_any", False), bool)
    assert isinstance(r.get("opens", False), bool)
    assert isinstance(r.get("keep", False), bool)
    if r.get("keep"):
        assert r["category"] == "benign", "keep only matters for benign matches"
    kws = r["keywords"]
    assert isinstance(kws, list) and kws and all(isinstance(k, str) and k.strip() for k in kws)
    ex = r["examples"]
    assert isinstance(ex, list) and ex and all(isinstance(e, str) and e for e in ex)


@pytest.mark.parametrize("rule_id", _rule_ids())
def test_pattern_compiles_with_allowed_named_groups(rule_id):
    r = RULE_BY_ID[rule_id]
    pl.Series([""]).str.contains(r["pattern"])  # raises on syntax polars (Rust regex) rejects
    fields = pl.Series(r["examples"]).str.extract_groups(r["pattern"]).struct.fields
    allowed = GROUP_NAMES | (MARKER_GROUPS if "marker" in r else set()) | ({SUBJECT} if r.get("placed") else set())
    assert set(fields) <= allowed, f"unnamed or unknown groups: {set(fields) - allowed}"
    if r.get("placed"):
        assert SUBJECT in fields and r["category"] in CATEGORIES
    if "marker" in r:
        assert r["marker"] in MARKERS and r["category"] == "benign" and not r.get("keep")
    if r["category"] == "from_xid":
        assert "xid" in fields
    if "caused_by_xid" in fields or "recovery_action" in fields:
        assert r["category"] == "from_xid"


@pytest.mark.parametrize("rule_id", _rule_ids())
def test_examples_match_own_pattern_and_name_a_keyword(rule_id):
    r = RULE_BY_ID[rule_id]
    ex = pl.Series(r["examples"])
    missed = [e for e, ok in zip(r["examples"], ex.str.contains(r["pattern"]).to_list()) if not ok]
    assert not missed
    no_kw = [e for e in r["examples"] if not any(k in e for k in r["keywords"])]
    assert not no_kw, "the keyword prefilter would never let these lines reach the rule"


@pytest.mark.parametrize("rule_id", _rule_ids())
def test_named_groups_extract_values_on_examples(rule_id):
    r = RULE_BY_ID[rule_id]
    ext = pl.Series(r["examples"]).str.extract_groups(r["pattern"])
    for field in ext.struct.fields:
        vals = ext.struct.field(field).to_list()
        empty = [e for e, v in zip(r["examples"], vals) if not v]
        assert not empty, f"group {field} empty on {empty}"
        if field in {"xid", "sxid", "caused_by_xid", "nccl_status", "rank", "cuda_dev"}:
            assert all(v.isdigit() for v in vals), (field, vals)


def test_a_glog_stamped_line_still_matches():
    """A glog stamp (``W1202 15:15:34.411623 26519 nvc.c:273] ``) is stripped with its file:line,
    so an example that starts with the file:line must also match without it."""
    glog_file = re.compile(r"^[\w.-]+\.(?:go|cc|cpp|py|c|h|rs):\d+\] ")
    bad = [
        (r["id"], e)
        for r in ordered_rules()
        for e in r["examples"]
        if glog_file.match(e) and not re.search(r["pattern"], glog_file.sub("", e))
    ]
    assert not bad


def test_every_example_is_claimed_by_its_own_rule():
    """A classification rule's examples are its own; a marker rule's (progress.yaml) are its own
    in the marker pass, which tries the marker rules alone, and stay benign in the classifier."""
    owners, messages = [], []
    for i, r in enumerate(ordered_rules()):
        owners += [i] * len(r["examples"])
        messages += r["examples"]
    rules = ordered_rules()
    markers = [i for i, r in enumerate(rules) if "marker" in r]
    first_marker = first_match(messages, markers)
    wrong = [
        (rules[o]["id"], msg, None if w is None else rules[w]["id"])
        for o, msg, w, wm in zip(owners, messages, first_match(messages), first_marker)
        if (
            w != o
            if o not in markers
            else wm != o or w is None or rules[w]["category"] != "benign" or rules[w].get("keep")
        )
    ]
    assert not wrong, "example -> (own rule, shadowed by):\n" + "\n".join(
        f"  {own}: {msg!r} -> {by}" for own, msg, by in wrong
    )


def test_examples_carry_no_line_prefix():
    stamp = re.compile(
        r"^(?:<\d>|\[\s*\d+\.\d+\]|\d+,\d+,\d+,|[A-Z][a-z]{2} [ \d]\d \d\d:|\d{4}-\d\d-\d\dT|\[rank\d+\]:|\[?[IWEF]\d{4} \d\d:)"
    )
    bad = [(r["id"], e) for r in ordered_rules() for e in r["examples"] if stamp.match(e)]
    assert not bad


# ---------------------------------------------------------------------------- Xid catalog


def test_xid_catalog_columns_and_vocabulary():
    assert (MODELS / "xid_catalog.csv").read_text().splitlines()[
        0
    ] == "xid,name,meaning,category,severity,action,nvidia_action"
    cat = catalog()
    assert cat["xid"].n_unique() == cat.height
    assert cat.null_count().sum_horizontal().item() == 0
    assert set(cat["category"]) <= CATEGORIES - {"benign", "unknown"}
    assert set(cat["severity"]) <= SEVERITIES
    assert set(cat["action"]) <= ACTIONS


def test_xid_catalog_covers_taxonomy_with_its_categories():
    got = dict(zip(catalog()["xid"].to_list(), catalog()["category"].to_list()))
    missing = sorted(set(TAXONOMY_XIDS) - set(got))
    assert not missing
    wrong = {x: (got[x], c) for x, c in TAXONOMY_XIDS.items() if got[x] != c}
    assert not wrong, "xid: (catalog, taxonomy)"


def test_xid_catalog_nvlink5_units_and_key_severities():
    cat = catalog()
    names = dict(zip(cat["xid"].to_list(), cat["name"].to_list()))
    assert {x: names[x] for x in NVLINK5_UNITS} == NVLINK5_UNITS
    sev = dict(zip(cat["xid"].to_list(), cat["severity"].to_list()))
    act = dict(zip(cat["xid"].to_list(), cat["action"].to_list()))
    assert sev[63] == "info" and sev[92] == "warning"
    assert all(sev[x] == "critical" for x in (48, 64, 79, 95, 119, 140))
    assert all(sev[x] == "error" for x in (13, 31, 43))
    assert all(act[x] == "fix_application" for x in (13, 31, 43, 69))
    assert act[79] == "reboot_node" and act[64] == "drain_node" and act[63] == "none"


def test_xid_catalog_meta():
    meta = yaml.safe_load((MODELS / "xid_catalog.meta.yaml").read_text())
    assert meta["version"] == 1
    assert str(meta["revision_date"]) == "2025-09-30"
    assert meta["source"]


# ---------------------------------------------------------------------------- error words


def test_error_words_shape():
    data = error_words()
    words = data["words"]
    assert words and len(words) == len(set(words))
    assert all(isinstance(w, str) and w == w.lower() and w.strip() == w and w for w in words)
    assert all(isinstance(p, str) and p for p in data.get("benign_despite") or [])


def test_error_words_do_not_fire_inside_common_benign_words():
    healthy = [
        "using default config",
        "Successfully installed torch-2.5.1",
        "studied the room",
        "zoom level set",
        "Started Session 12 of User alice.",
        "step 88200 loss 1.873",
    ]
    variants = {v for w in error_words()["words"] for v in _variants(w)}
    hits = [(h, v) for h in healthy for v in variants if v in h]
    assert not hits


# ---------------------------------------------------------------------------- real-format cases

_HOST = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_TAG = r"[A-Za-z0-9_.@/-]+(?:\[\d+\])?:"
# One alternative per stamp shape faultline reads (kernel, Slurm, fabric manager,
# Python logging, glog). A line is: [rank label] [pdsh host, only before a stamp] [stamp]
# [raw dmesg stamp inside a syslog line] message.
_STAMPS = [
    re.compile(p)
    for p in (
        r"\d{1,3},\d+,\d+,[^;]*;",  # /dev/kmsg
        r"(?:<\d{1,3}>)?\[\s*\d+\.\d+\]\s?",  # raw / printk
        r"\[[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}\]\s?",  # dmesg -T
        r"(?:[a-z]+\s*:[a-z]+\s*:\s)?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+(?:[+-]\d\d:?\d\d)?\s",  # dmesg iso, -x
        rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\s+(?P<host>{_HOST})\s+{_TAG}\s?",  # rfc3339 / journald
        rf"[A-Z][a-z]{{2}}\s+\d{{1,2}} \d\d:\d\d:\d\d\s+(?P<host>{_HOST})\s+{_TAG}\s?",  # BSD syslog
        r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\]\s",  # slurmctld
        r"\[[A-Z][a-z]{2} \d{1,2} \d{4} \d\d:\d\d:\d\d\]\s",  # fabric manager
        r"\[?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)?\]?\s",  # python logging
        r"\[?[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?(?:\s+\d+)?\s+[\w.]+:\d+\]\s?",  # glog
    )
]
_RANK_LABEL = re.compile(r"\[(?:rank|default)\d+\]:\s?")
_PDSH = re.compile(rf"(?P<host>{_HOST}):\s+")
_INNER_MONO = re.compile(r"\[\s*\d+\.\d+\]\s?")
PREFIX_KINDS = {
    "raw dmesg": r"^\[\s*\d+\.\d+\] ",
    "printk": r"^<\d>\[",
    "kmsg": r"^\d,\d+,\d+,[^;]*;",
    "dmesg -T": r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} ",
    "dmesg iso": r"^\d{4}-\d\d-\d\dT[\d:]+,\d+\+",
    "dmesg -x": r"^kern\s+:",
    "bsd syslog": r"^[A-Z][a-z]{2} \d\d \d\d:",
    "bsd padded day": r"^[A-Z][a-z]{2}  \d ",
    "rfc3339": r"^\d{4}-\d\d-\d\dT[\d:]+\.\d+\+\d\d:\d\d \S+ ",
    "journald short-iso": r"^\d{4}-\d\d-\d\dT[\d:]+\+\d{4} ",
    "pdsh": r"^node-[\w]+: (?!\S+:\d+:\d+ )",
    "rank label": r"^\[rank\d+\]:",
    "nccl": r"\S+:\d+:\d+ \[\d+\] ",
    "glog": r"\[[EW]\d{4} ",
    "slurmctld": r"^\[\d{4}-\d\d-\d\dT",
    "fabric manager": r"^\[[A-Z][a-z]{2} \d+ \d{4} ",
}
EXPECT_KEYS = {"category", "family", "rule_id", "xid", "sxid", "gpu_pci", "node", "severity", "action"}


def _stamp(text: str) -> re.Match | None:
    return next((m for rx in _STAMPS if (m := rx.match(text))), None)


def strip_prefix(line: str) -> tuple[str | None, str]:
    """(host named by the prefix, message) of a line."""
    msg, host = line, None
    if m := _RANK_LABEL.match(msg):
        msg = msg[m.end() :]
    if (m := _PDSH.match(msg)) and _stamp(msg[m.end() :]):
        host, msg = m["host"], msg[m.end() :]
    if m := _stamp(msg):
        host = host or m.groupdict().get("host")
        msg = msg[m.end() :]
    if m := _INNER_MONO.match(msg):
        msg = msg[m.end() :]
    return host, msg


def normalize_pci(text: str) -> str:
    dom, bus, dev = re.match(r"(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})", text.lower()).groups()
    return f"{(dom or '0000')[-4:]}:{bus}:{dev}"


def resolve(line: str) -> dict:
    """What the case's line classifies as under the data alone (no engine)."""
    host, msg = strip_prefix(line)
    idx = first_match([msg])[0]
    if idx is None:
        words = {v for w in error_words()["words"] for v in _variants(w)}
        err = any(w in msg for w in words) and not any(p in msg for p in error_words().get("benign_despite") or [])
        return {
            "category": "unknown" if err else "benign",
            "rule_id": None,
            "node": host,
            "severity": "warning" if err else "info",
            "action": "none",
            "_msg": msg,
        }
    r = ordered_rules()[idx]
    g = {k: v for k, v in groups_of(r["pattern"], msg).items() if v}
    out = {
        "rule_id": r["id"],
        "family": r["family"],
        "category": r["category"],
        "severity": r.get("severity"),
        "action": r.get("action"),
        "node": g.get("node") or host,
        "_msg": msg,
        "_rule": r,
    }
    for k in ("xid", "sxid"):
        if k in g:
            out[k] = int(g[k])
    if "gpu_pci" in g:
        out["gpu_pci"] = normalize_pci(g["gpu_pci"])
    if r["category"] == "from_xid":
        rows = {x: row for x, *row in catalog().select("xid", "category", "severity", "action").iter_rows()}
        cat, sev, act = rows.get(out["xid"], ("unknown", "error", "none"))
        cause = rows.get(int(g["caused_by_xid"])) if "caused_by_xid" in g else None
        out["category"] = cause[0] if cause and cause[0] != "user_app" else cat
        out["severity"], out["action"] = r.get("severity") or sev, r.get("action") or act
    elif r["category"] == "from_sxid":
        out["category"] = "nvlink"
    elif r.get("placed") and (sub := placement(groups_of(r["pattern"], msg)[SUBJECT])):
        out.update(category=sub["category"], family=sub["family"], action=sub.get("action", out["action"]))
    return out


@lru_cache(maxsize=1)
def cases() -> list[dict]:
    return yaml.safe_load(CASES.read_text())["cases"]


def test_cases_cover_families_prefixes_and_categories():
    cs = cases()
    assert len(cs) >= 80
    assert all(set(c) == {"line", "expect"} and set(c["expect"]) <= EXPECT_KEYS for c in cs)
    assert {c["expect"]["family"] for c in cs if "family" in c["expect"]} == FAMILIES
    lines = [c["line"] for c in cs]
    unused = [k for k, rx in PREFIX_KINDS.items() if not any(re.search(rx, ln) for ln in lines)]
    assert not unused, f"no case uses prefix kind(s) {unused}"
    cats = {c["expect"]["category"] for c in cs}
    assert CATEGORIES <= cats, CATEGORIES - cats


@pytest.mark.parametrize("case", cases(), ids=lambda c: c["line"][:70])
def test_case_resolves_as_stated(case):
    exp = case["expect"]
    assert exp["category"] in CATEGORIES
    if "rule_id" in exp:
        assert exp["rule_id"] in RULE_BY_ID
        r = RULE_BY_ID[exp["rule_id"]]
        placed = {e["family"] for e in subsystems()} if r.get("placed") else set()
        assert exp.get("family") in {r["family"]} | placed
    got = resolve(case["line"])
    assert got["rule_id"] == exp.get("rule_id"), got["_msg"]
    if got["rule_id"]:
        assert any(k in got["_msg"] for k in got["_rule"]["keywords"])
    for key, want in exp.items():
        if key == "gpu_pci":
            want = normalize_pci(want)
        assert got.get(key) == want, f"{key}: got {got.get(key)!r}, case says {want!r}"
