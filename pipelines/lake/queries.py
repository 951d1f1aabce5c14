"""Named, parameterized queries (``sql/queries/*.sql``) and the read-only SQL guard. The
header format and parameter types are in sql/README.md. Parameters are set with
``SET VARIABLE name = ?`` and a bound value: values never become SQL text."""

from __future__ import annotations

import datetime as dt
import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import duckdb
import polars as pl

from . import storage as _storage
from . import views as _views

TYPES = ("text", "int", "float", "bool", "date")
_HEADER = re.compile(r"^--\s*(name|description|param)\s*:\s*(.*?)\s*$")
_PARAM = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\((?P<type>[^,()]+?)\s*,\s*"
    r"(?:(?P<required>required)|default:\s*(?P<default>[^()]*?))\s*\)\s*(?P<help>.*)$"
)
_TRUE = {"true", "t", "yes", "y", "1", "on"}
_FALSE = {"false", "f", "no", "n", "0", "off"}


class QueryError(ValueError):
    """A named query or its parameters cannot be used as given (the message says why)."""


class ReadOnlyError(QueryError):
    """Ad-hoc SQL that is not a single read-only statement."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # one of TYPES
    required: bool = False
    default: Any = None  # already converted to ``type``
    default_text: str = "NULL"  # as written in the header (with its meaning)
    choices: tuple[str, ...] = ()  # for ``a|b|c`` types
    help: str = ""

    def describe(self) -> str:
        kind = "|".join(self.choices) if self.choices else self.type
        return f"{self.name} ({kind}, {'required' if self.required else 'default: ' + self.default_text})" + (
            f" {self.help}" if self.help else ""
        )


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    params: tuple[Param, ...]
    sql: str
    file: str

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def convert(value: Any, p: Param) -> Any:
    """``value`` (a string from the command line or a Python value) as ``p``'s type."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().upper() == "NULL":
        return None
    what = f"parameter {p.name!r} ({p.type})"
    try:
        if p.type == "text":
            if not isinstance(value, str):
                raise TypeError
            if p.choices and value not in p.choices:
                raise QueryError(f"{what} must be one of {', '.join(p.choices)}, not {value!r}")
            return value
        if p.type == "int":
            if isinstance(value, bool) or isinstance(value, float):
                raise TypeError
            out = int(value.strip(), 10) if isinstance(value, str) else int(value)
            if not -(2**63) <= out < 2**63:
                raise QueryError(f"{what}: {value!r} is out of range")
            return out
        if p.type == "float":
            if isinstance(value, bool):
                raise TypeError
            out = float(value)
            if out != out or out in (float("inf"), float("-inf")):
                raise QueryError(f"{what}: {value!r} is not a finite number")
            return out
        if p.type == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            raise TypeError
        if p.type == "date":
            if isinstance(value, dt.datetime):
                raise TypeError
            if isinstance(value, dt.date):
                return value
            return dt.date.fromisoformat(value.strip())
    except QueryError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise QueryError(
            f"{what}: {value!r} is not a valid {p.type}" + (" (YYYY-MM-DD)" if p.type == "date" else "")
        ) from exc
    raise QueryError(f"{what}: unknown type")  # pragma: no cover - types are checked when parsing


def _parse_param(line: str, file: str) -> Param:
    m = _PARAM.match(line)
    if not m:
        raise QueryError(
            f"{file}: cannot read '-- param: {line}' "
            "(expected 'name (type, default: VALUE[ = meaning]) help' or 'name (type, required) help')"
        )
    kind = m["type"].strip()
    choices: tuple[str, ...] = ()
    if "|" in kind:
        choices = tuple(c.strip() for c in kind.split("|"))
        kind = "text"
    if kind not in TYPES:
        raise QueryError(f"{file}: parameter {m['name']!r} has unknown type {kind!r} (use {', '.join(TYPES)} or a|b|c)")
    p = Param(m["name"], kind, required=bool(m["required"]), choices=choices, help=m["help"].strip())
    if m["required"]:
        return p
    text = m["default"].strip()
    value = text.split(" = ", 1)[0].strip()
    return Param(p.name, kind, False, convert(value, p), text, choices, p.help)


def parse_query(text: str, file: str = "<query>") -> NamedQuery:
    """Read a query file's header (see the module docstring); the SQL is the whole text."""
    fields: dict[str, str] = {}
    params: list[Param] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.lstrip().startswith("--"):
            break
        m = _HEADER.match(line.strip())
        if not m:
            continue
        key, value = m.groups()
        if key == "param":
            params.append(_parse_param(value, file))
        else:
            fields[key] = value
    if "name" not in fields:
        raise QueryError(f"{file}: no '-- name:' line in the header")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise QueryError(f"{file}: a parameter is declared twice")
    return NamedQuery(fields["name"], fields.get("description", ""), tuple(params), text, file)


def load_queries() -> dict[str, NamedQuery]:
    """Every named query shipped in ``faultline.sql/queries``, by name."""
    folder = resources.files("faultline.sql").joinpath("queries")
    out: dict[str, NamedQuery] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        q = parse_query(entry.read_text(encoding="utf-8"), entry.name)
        if q.name in out:
            raise QueryError(f"query name {q.name!r} is used by {out[q.name].file} and {entry.name}")
        out[q.name] = q
    return out


def get_query(name: str, queries: Mapping[str, NamedQuery] | None = None) -> NamedQuery:
    queries = load_queries() if queries is None else queries
    if name in queries:
        return queries[name]
    close = difflib.get_close_matches(name, list(queries), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise QueryError(f"no query named {name!r}{hint} (faultline sql --list shows them all)")


def bind(query: NamedQuery, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every declared parameter's value: given (converted to its type) or its default."""
    values = dict(values or {})
    unknown = [k for k in values if query.param(k) is None]
    if unknown:
        known = ", ".join(p.name for p in query.params) or "none"
        raise QueryError(f"query {query.name!r} has no parameter {', '.join(map(repr, unknown))} (parameters: {known})")
    out: dict[str, Any] = {}
    for p in query.params:
        v = convert(values[p.name], p) if p.name in values else p.default
        if p.required and v is None:
            raise QueryError(f"query {query.name!r} needs parameter {p.name!r} ({p.type}): --param {p.name}=VALUE")
        out[p.name] = v
    return out


# -- connections and execution ------------------------------------------------------------


def db_exists_hint(warehouse: str | os.PathLike) -> str | None:
    """Why ``warehouse`` cannot be queried (None when it can)."""
    path = _views.db_path(warehouse)
    if path.is_file():
        return None
    return (
        f"no warehouse at {path.parent} ({path.name} is missing): "
        "run `faultline run` (or `faultline demo`) first, or pass --warehouse DIR"
    )


def connect(warehouse: str | os.PathLike) -> duckdb.DuckDBPyConnection:
    """A read-only connection that can read the warehouse's files and nothing else: the view
    database attached READ_ONLY, UTC, no file access outside the warehouse, no extension
    auto-loading, and the configuration locked so a query cannot undo any of it."""
    path = _views.db_path(warehouse)
    hint = db_exists_hint(warehouse)
    if hint:
        raise FileNotFoundError(hint)
    con = _views.connect_readonly(warehouse)
    try:
        if _storage.is_url(warehouse):
            # the views read the lake and analytics objects under the warehouse URL
            allowed = [_storage.to_path(warehouse).url.rstrip("/") + "/"]
        else:
            root = str(path.parent.resolve())
            # the views read the lake and analytics Parquet files through their resolved paths
            allowed = sorted({root + os.sep, os.path.realpath(root) + os.sep})
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET allowed_directories = ?", [allowed])
        con.execute("SET enable_external_access = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def covered_day(con: duckdb.DuckDBPyConnection, day: dt.date | None = None) -> dt.date:
    """``day`` if the warehouse covers it (default: its last day), else ``QueryError`` naming
    the days it does cover, so a date outside the data is an error, never a page of zeros."""
    first, last, n = con.execute("SELECT min(date), max(date), count(DISTINCT date) FROM ingest_audit").fetchall()[0]
    if last is None:
        raise QueryError("the warehouse has no ingested days yet: run `faultline run` first")
    if day is None:
        return last
    hit = con.execute("SELECT count(*) FROM ingest_audit WHERE date = ?", [day]).fetchall()[0][0]
    if not hit:
        raise QueryError(f"{day} is not in the warehouse (it covers {first} to {last}, {n} day(s))")
    return day


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """``sql`` as one SELECT statement, or ``ReadOnlyError`` saying what it is instead."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL does not parse: {str(exc).splitlines()[0]}") from exc
    if not statements:
        raise ReadOnlyError("no SQL statement given")
    if len(statements) > 1:
        raise ReadOnlyError(
            f"only one statement at a time: got {len(statements)} (faultline sql is read-only and runs a single SELECT)"
        )
    kind = statements[0].type.name
    if kind != "SELECT":
        word = _first_word(statements[0].query) or kind
        raise ReadOnlyError(
            f"refusing {word} ({kind} statement): faultline sql is read-only and runs only "
            "SELECT queries (also WITH ..., FROM ..., DESCRIBE, SHOW, SUMMARIZE)"
        )
    return sql


def _first_word(sql: str) -> str:
    text = re.sub(r"(?s)/\*.*?\*/|--[^\n]*", " ", sql).lstrip(" \t\r\n(")
    m = re.match(r"[A-Za-z_]+", text)
    return m.group().upper() if m else ""


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
    rel = con.sql(sql, params=dict(params)) if params else con.sql(sql)
    if rel is None:  # pragma: no cover - a SELECT always yields a relation
        return pl.DataFrame()
    return rel.pl()


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
    """Run one ad-hoc read-only statement (see ``check_read_only``); ``params`` bind its
    DuckDB ``$name`` parameters."""
    check_read_only(con, sql)
    try:
        return _frame(con, sql, params)
    except duckdb.Error as exc:
        raise QueryError(_short(exc, con)) from exc


def run_query(
    target: str | os.PathLike | duckdb.DuckDBPyConnection,
    name: str | NamedQuery,
    params: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """Run a named query with bound parameters on a read-only connection; a polars frame.
    ``target``: a warehouse folder (a fresh hardened connection is opened and closed) or an open
    connection (its variables of the same names are set, then reset)."""
    query = name if isinstance(name, NamedQuery) else get_query(name)
    values = bind(query, params)
    if isinstance(target, duckdb.DuckDBPyConnection):
        return _run_bound(target, query, values)
    con = connect(target)
    try:
        return _run_bound(con, query, values)
    finally:
        con.close()


def _run_bound(con: duckdb.DuckDBPyConnection, query: NamedQuery, values: Mapping[str, Any]) -> pl.DataFrame:
    try:
        for key, value in values.items():
            # the name is an identifier from our own header; the value is always bound
            con.execute(f'SET VARIABLE "{key}" = ?', [value])
        return _frame(con, query.sql)
    except duckdb.Error as exc:
        raise QueryError(f"query {query.name!r} failed: {_short(exc, con)}") from exc
    finally:
        for key in values:
            try:
                con.execute(f'RESET VARIABLE "{key}"')
            except duckdb.Error:  # pragma: no cover - a closed connection
                pass


def _short(exc: BaseException, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The error's first line, with a hint that names only tables, views and queries that exist."""
    text = str(exc).strip()
    lines = text.splitlines() or [type(exc).__name__]
    line = lines[0]
    missing = re.search(r"with name (\S+) does not exist", line)
    if isinstance(exc, duckdb.CatalogException) and missing:
        name = missing.group(1).strip("\"'")
        tables = _table_names(con)
        close = difflib.get_close_matches(name, tables, n=3, cutoff=0.5)
        close += [t for t in tables if len(name) >= 4 and name.lower() in t.lower()]
        close = list(dict.fromkeys(close))[:3]
        if name in load_queries():
            also = f"; the table{'s' if len(close) > 1 else ''} {' or '.join(close)}?" if close else ""
            line += f" ({name} is a named query, not a table: faultline sql --query {name}{also})"
        elif close:
            line += f' (did you mean {" or ".join(close)}? faultline sql "SHOW TABLES" lists them all)'
        else:
            line += ' (faultline sql "SHOW TABLES" lists the tables and views)'
    else:
        hint = next((x for x in lines[1:] if x.startswith(("Did you mean", "Candidate bindings"))), None)
        if hint:
            line += f" ({hint})"
    return line


def _table_names(con: duckdb.DuckDBPyConnection | None) -> list[str]:
    if con is None:
        return []
    try:
        return sorted({r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()})
    except duckdb.Error:  # pragma: no cover - a closed connection
        return []


def describe(queries: Mapping[str, NamedQuery] | None = None) -> list[dict[str, Any]]:
    """Name, description and parameters of every query (for ``faultline sql --list``)."""
    queries = load_queries() if queries is None else queries
    return [
        {"name": q.name, "description": q.description, "params": [p.describe() for p in q.params]}
        for q in queries.values()
    ]
