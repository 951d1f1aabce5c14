"""The known-issues file (docs/known-issues.md): read as safe YAML nodes, every key and value
checked, a mistake one ``KnownIssuesError`` naming the file and line; regexes run in polars'
linear-time engine, capped in length; nothing is evaluated."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import yaml

ENV = "FAULTLINE_KNOWN_ISSUES"
FILE_NAME = "known_issues.yaml"
MAX_FILE_BYTES = 1_000_000
MAX_REGEX_CHARS = 1_000
MAX_TEXT_CHARS = 4_000
QUIET_DAYS = 14
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")

TOP_KEYS = ("version", "quiet_days", "issues")
ENTRY_KEYS = (
    "id",
    "title",
    "match",
    "scope",
    "verdict",
    "runbook",
    "hotfix",
    "ticket",
    "owner",
    "opened",
    "expires",
    "closed",
    "drain",
    "notes",
)
MATCH_KEYS = ("rule", "category", "xid", "sxid", "signature", "message")
SCOPE_KEYS = ("provider", "cluster", "rack", "node", "gpu_model", "driver", "since", "until")
VERDICT_KEYS = ("root_cause", "action", "severity")


_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map")}
_UNSET = object()


class _AliasError(yaml.YAMLError):
    def __init__(self, line: int):
        super().__init__(f"alias on line {line}")
        self.line = line


class _Loader(yaml.SafeLoader):
    """Safe YAML whose composer refuses aliases (no shared nodes, no exponential expansion)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise _AliasError(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)


class KnownIssuesError(ValueError):
    """A mistake in the known-issues file: ``FILE:LINE: what``."""


@dataclass(frozen=True)
class KnownIssue:
    """One entry: what it matches, where, what it says instead, and who owns it."""

    id: str
    title: str
    line: int
    rules: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    xids: tuple[int, ...] = ()
    sxids: tuple[int, ...] = ()
    signatures: tuple[str, ...] = ()
    message: str | None = None
    providers: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    racks: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()
    since: dt.date | None = None
    until: dt.date | None = None
    root_cause: str | None = None
    action: str | None = None
    severity: str | None = None
    runbook: str | None = None
    hotfix: str | None = None
    ticket: str | None = None
    owner: str | None = None
    opened: dt.date | None = None
    expires: dt.date | None = None
    closed: dt.date | None = None
    drain: bool = False
    notes: str | None = None

    @property
    def ends(self) -> dt.date | None:
        """The last day the entry is in force (its expiry or its closing day, the earlier)."""
        days = [d for d in (self.expires, self.closed) if d is not None]
        return min(days) if days else None

    @property
    def overrides(self) -> bool:
        return any(v is not None for v in (self.root_cause, self.action, self.severity))

    def says_drain(self) -> bool:
        return self.drain or self.action == "drain_node"

    def status(self, as_of: dt.date, last_seen: dt.date | None, quiet_days: int) -> str:
        """closed, expired, quiet (no match for ``quiet_days`` up to ``as_of``: maybe fixed) or open."""
        if self.closed is not None and self.closed <= as_of:
            return "closed"
        if self.expires is not None and self.expires < as_of:
            return "expired"
        since = last_seen or self.opened
        if since is not None and (as_of - since).days >= quiet_days:
            return "quiet"
        return "open"

    def verdict_text(self) -> str | None:
        parts = [f"{k} {v}" for k, v in zip(VERDICT_KEYS, (self.root_cause, self.action, self.severity)) if v]
        return ", ".join(parts) or None


@dataclass(frozen=True)
class Registry:
    """A loaded file: its entries in file order (the first that matches a failure wins)."""

    path: str | None
    issues: tuple[KnownIssue, ...] = ()
    quiet_days: int = QUIET_DAYS
    sha256: str = ""

    def get(self, issue_id: str) -> KnownIssue | None:
        return next((k for k in self.issues if k.id == issue_id), None)


EMPTY = Registry(None)


def default_path(warehouse: str | os.PathLike | None) -> Path | None:
    """``known_issues.yaml`` in the folder that holds the warehouse (none for a URL warehouse)."""
    from ..lake.storage import is_url

    if warehouse is None or is_url(os.fsdecode(warehouse)):
        return None
    return Path(os.path.abspath(os.fsdecode(warehouse))).parent / FILE_NAME


def resolve(path: str | os.PathLike | None, warehouse: str | os.PathLike | None) -> tuple[Path | None, bool]:
    """Which file applies, and whether it must exist: the given path, else env
    ``FAULTLINE_KNOWN_ISSUES`` (both must exist), else the default (optional)."""
    if path is not None and os.fsdecode(path) != "":
        return Path(os.fsdecode(path)), True
    env = os.environ.get(ENV)
    if env:
        return Path(env), True
    return default_path(warehouse), False


def load_for(path: str | os.PathLike | None, warehouse: str | os.PathLike | None) -> Registry:
    """The registry that applies to ``warehouse`` (``resolve``); ``EMPTY`` when none."""
    where, required = resolve(path, warehouse)
    if where is None or (not required and not where.is_file()):
        return EMPTY
    return load(where)


def load(path: str | os.PathLike, taxonomy=None) -> Registry:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise KnownIssuesError(f"{path}: {size:,} bytes; a known-issues file may hold {MAX_FILE_BYTES:,} at most")
        data = path.read_bytes()
    except OSError as exc:
        raise KnownIssuesError(f"{path}: cannot read the known-issues file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise KnownIssuesError(f"{path}:{line}: not valid UTF-8") from exc
    return parse(text, str(path), taxonomy, sha256=hashlib.sha256(data).hexdigest())


def parse(text: str, name: str = "<known issues>", taxonomy=None, sha256: str = "") -> Registry:
    """Validate ``text`` and return its entries; the first mistake raises ``KnownIssuesError``."""
    if taxonomy is None:
        from ..classify.ruleset import load_ruleset

        rs = load_ruleset()
        taxonomy, rule_ids = rs.taxonomy, {r.id for r in rs.rules}
    else:
        rule_ids = None
    return _Reader(name, taxonomy, rule_ids).registry(text, sha256 or hashlib.sha256(text.encode()).hexdigest())


class _Reader:
    def __init__(self, name: str, taxonomy, rule_ids: set[str] | None):
        self.name, self.tax, self.rule_ids = name, taxonomy, rule_ids
        self.seen: set[int] = set()

    def fail(self, node: yaml.Node | None, what: str):
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        raise KnownIssuesError(f"{self.name}{line}: {what}")

    # ------------------------------------------------------------------ YAML nodes
    def registry(self, text: str, sha256: str) -> Registry:
        try:
            root = yaml.compose(text, Loader=_Loader)
        except _AliasError as exc:
            raise KnownIssuesError(
                f"{self.name}:{exc.line}: anchors and aliases (&name, *name) are not allowed"
            ) from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise KnownIssuesError(f"{self.name}{where}: not valid YAML: {problem}") from exc
        if root is None:
            return Registry(self.name, (), QUIET_DAYS, sha256)
        top = self.mapping(root, TOP_KEYS, "the file")
        if "version" in top and self.scalar(top["version"][1]) != 1:
            self.fail(top["version"][1], "version must be 1")
        quiet = QUIET_DAYS
        if "quiet_days" in top:
            quiet = self.integer(top["quiet_days"][1], "quiet_days", 1, 3650)
        issues: list[KnownIssue] = []
        if "issues" in top:
            node = top["issues"][1]
            if isinstance(node, yaml.ScalarNode) and self.scalar(node) is None:
                items = []
            elif not isinstance(node, yaml.SequenceNode):
                self.fail(node, "issues must be a list of entries (each starting with '- id: ...')")
            else:
                items = node.value
            ids: dict[str, int] = {}
            for item in items:
                issue = self.entry(item)
                if issue.id in ids:
                    self.fail(item, f"id {issue.id!r} is used twice (first on line {ids[issue.id]})")
                ids[issue.id] = issue.line
                issues.append(issue)
        return Registry(self.name, tuple(issues), quiet, sha256)

    def visit(self, node: yaml.Node) -> None:
        if id(node) in self.seen:
            self.fail(node, "anchors and aliases (&name, *name) are not allowed")
        self.seen.add(id(node))
        if node.tag not in _TAGS:
            self.fail(node, f"tag {node.tag} is not allowed (plain text, numbers, dates, lists and mappings only)")

    def mapping(self, node: yaml.Node, allowed: tuple[str, ...], what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        self.visit(node)
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping of keys ({', '.join(allowed)})")
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for k, v in node.value:
            self.visit(k)
            key = k.value if isinstance(k, yaml.ScalarNode) else None
            if key == "<<":
                self.fail(k, "merge keys (<<) are not allowed")
            if key not in allowed:
                self.fail(k, f"unknown key {key!r} in {what} (allowed: {', '.join(allowed)})")
            if key in out:
                self.fail(k, f"key {key!r} is given twice in {what}")
            out[key] = (k, v)
        return out

    def scalar(self, node: yaml.Node):
        self.visit(node)
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, "expected a single value here, not a list or mapping")
        try:
            return yaml.SafeLoader("").construct_object(node)
        except (ValueError, yaml.YAMLError):
            return node.value  # looks like a date or number but is none (2026-13-01): checked as text

    def values(self, node: yaml.Node) -> list[tuple[yaml.Node, object]]:
        """A scalar or a list of scalars, with the node of each."""
        if isinstance(node, yaml.SequenceNode):
            self.visit(node)
            if not node.value:
                self.fail(node, "an empty list matches nothing: give at least one value or drop the key")
            return [(n, self.scalar(n)) for n in node.value]
        return [(node, self.scalar(node))]

    def strings(self, node: yaml.Node, key: str, max_len: int = 500) -> tuple[str, ...]:
        out = []
        for n, v in self.values(node):
            if not isinstance(v, str) or not v.strip():
                hint = f" (quote it: {key}: '{v}')" if isinstance(v, (int, float, dt.date)) else ""
                self.fail(n, f"{key} must be text{hint}")
            if len(v) > max_len:
                self.fail(n, f"{key} is longer than {max_len} characters")
            out.append(v)
        return tuple(out)

    def integer(self, node: yaml.Node, key: str, lo: int, hi: int, v=_UNSET) -> int:
        v = self.scalar(node) if v is _UNSET else v
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            self.fail(node, f"{key} must be a whole number from {lo} to {hi}, not {v!r}")
        return v

    def date(self, node: yaml.Node, key: str) -> dt.date:
        v = self.scalar(node)
        if isinstance(v, dt.datetime):
            self.fail(node, f"{key} must be a date (YYYY-MM-DD), not a time")
        if isinstance(v, dt.date):
            return v
        if isinstance(v, str):
            try:
                return dt.date.fromisoformat(v.strip())
            except ValueError:
                pass
        self.fail(node, f"{key} must be a date YYYY-MM-DD, not {v!r}")

    def text(self, node: yaml.Node, key: str, allow_int: bool = False) -> str:
        v = self.scalar(node)
        if allow_int and isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str) or not v.strip():
            self.fail(node, f"{key} must be text")
        if len(v) > MAX_TEXT_CHARS:
            self.fail(node, f"{key} is longer than {MAX_TEXT_CHARS:,} characters")
        return v.strip()

    def choice(self, node: yaml.Node, key: str, allowed, v=_UNSET) -> str:
        v = self.scalar(node) if v is _UNSET else v
        if not isinstance(v, str) or v not in allowed:
            self.fail(node, f"{key} {v!r} is not one of: {', '.join(sorted(allowed))}")
        return v

    def regex(self, node: yaml.Node) -> str:
        v = self.scalar(node)
        if not isinstance(v, str) or not v:
            self.fail(node, "message must be a regular expression (text)")
        if len(v) > MAX_REGEX_CHARS:
            self.fail(node, f"message regex is longer than {MAX_REGEX_CHARS:,} characters")
        try:
            pl.Series([""], dtype=pl.String).str.contains(v)
        except pl.exceptions.PolarsError as exc:
            why = str(exc).strip().splitlines()
            self.fail(node, f"message is not a valid regular expression: {' '.join(w.strip() for w in why)[:300]}")
        return v

    # ------------------------------------------------------------------ one entry
    def entry(self, node: yaml.Node) -> KnownIssue:
        keys = self.mapping(node, ENTRY_KEYS, "an entry")
        for need in ("id", "title", "match", "opened"):
            if need not in keys:
                self.fail(node, f"an entry needs {need!r}")
        f: dict = {"line": node.start_mark.line + 1}
        idn = keys["id"][1]
        f["id"] = self.text(idn, "id", allow_int=True)
        if not _ID.fullmatch(f["id"]):
            self.fail(
                idn, f"id {f['id']!r}: letters, digits and _ . : - only (64 at most), starting with a letter or digit"
            )
        f["title"] = self.text(keys["title"][1], "title")
        self.match(keys["match"][1], f)
        if "scope" in keys:
            self.scope(keys["scope"][1], f)
        if "verdict" in keys:
            v = self.mapping(keys["verdict"][1], VERDICT_KEYS, "verdict")
            if not v:
                self.fail(keys["verdict"][1], "verdict needs root_cause, action or severity")
            if "root_cause" in v:
                f["root_cause"] = self.choice(v["root_cause"][1], "root_cause", set(self.tax.domains) - {"benign"})
            if "action" in v:
                f["action"] = self.choice(v["action"][1], "action", set(self.tax.actions))
            if "severity" in v:
                f["severity"] = self.choice(v["severity"][1], "severity", set(self.tax.severities))
        for key in ("runbook", "hotfix", "owner", "notes"):
            if key in keys:
                f[key] = self.text(keys[key][1], key)
        if "ticket" in keys:
            f["ticket"] = self.text(keys["ticket"][1], "ticket", allow_int=True)
        for key in ("opened", "expires", "closed"):
            if key in keys:
                f[key] = self.date(keys[key][1], key)
        for key in ("expires", "closed"):
            if key in f and f[key] < f["opened"]:
                self.fail(keys[key][1], f"{key} {f[key]} is before opened {f['opened']}")
        if "drain" in keys:
            v = self.scalar(keys["drain"][1])
            if not isinstance(v, bool):
                self.fail(keys["drain"][1], f"drain must be true or false, not {v!r}")
            f["drain"] = v
        return KnownIssue(**f)

    def match(self, node: yaml.Node, f: dict) -> None:
        m = self.mapping(node, MATCH_KEYS, "match")
        if not m:
            self.fail(node, f"match needs at least one of: {', '.join(MATCH_KEYS)}")
        if "rule" in m:
            rules = []
            for n, r in self.values(m["rule"][1]):
                if not isinstance(r, str) or not r:
                    self.fail(n, "rule must be a rule id (text)")
                if self.rule_ids is not None and not (
                    r in self.rule_ids or r == "error_words" or r.startswith("model:")
                ):
                    self.fail(n, f"unknown rule id {r!r} (the ids are in models/rules/*.yaml)")
                rules.append(r)
            f["rules"] = tuple(rules)
        if "category" in m:
            f["categories"] = tuple(
                self.choice(n, "category", set(self.tax.domains), v) for n, v in self.values(m["category"][1])
            )
        for key in ("xid", "sxid"):
            if key in m:
                f[f"{key}s"] = tuple(self.integer(n, key, 1, 65535, v) for n, v in self.values(m[key][1]))
        if "signature" in m:
            f["signatures"] = self.strings(m["signature"][1], "signature", MAX_TEXT_CHARS)
        if "message" in m:
            f["message"] = self.regex(m["message"][1])

    def scope(self, node: yaml.Node, f: dict) -> None:
        s = self.mapping(node, SCOPE_KEYS, "scope")
        for key, field in (
            ("provider", "providers"),
            ("cluster", "clusters"),
            ("rack", "racks"),
            ("node", "nodes"),
            ("gpu_model", "gpu_models"),
            ("driver", "drivers"),
        ):
            if key in s:
                f[field] = self.strings(s[key][1], key)
        for key in ("since", "until"):
            if key in s:
                f[key] = self.date(s[key][1], key)
        if "since" in f and "until" in f and f["until"] < f["since"]:
            self.fail(s["until"][1], f"until {f['until']} is before since {f['since']}")
