"""PyTorch NCCL flight-recorder dumps: load them (JSON only, never a pickle that could run code),
one row per rank, and the rank whose progress differs from the rest. Format: docs/landing.md;
why and how pickles are refused: docs/reliability.md, "Untrusted input"."""

from __future__ import annotations

import io
import json
import pickle
import pickletools
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ..schema import FLIGHT_SUMMARY

__all__ = [
    "MAX_DUMP_BYTES",
    "FlightRecorderError",
    "FlightRecorderRefused",
    "load_dump",
    "load_dump_files",
    "rank_from_filename",
    "default_pg_id",
    "summarize_dumps",
    "suspect_rank",
]

MAX_DUMP_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 1_000_000


_HOW_TO_EXPORT = (
    "Provide the JSON form instead: in the job, write "
    "torch._C._distributed_c10d._dump_nccl_trace_json() (torch >= 2.5; "
    "_dump_fr_trace_json() on torch >= 2.8) to flight_recorder/<rank>.json, or convert a pickle "
    "you trust on a trusted machine with "
    "json.dump(pickle.load(open(path, 'rb')), open(path + '.json', 'w'), default=str)."
)


class FlightRecorderError(ValueError):
    """A dump that cannot be read or does not have the flight-recorder structure."""


class FlightRecorderRefused(FlightRecorderError):
    """A dump refused for safety (a pickle, or a pickle with code-bearing opcodes)."""


# --------------------------------------------------------------------------- format sniffing

# Opcodes that can reach a callable, build arbitrary objects or depend on outside state.
_FORBIDDEN_OPCODES = frozenset(
    {
        "GLOBAL",
        "STACK_GLOBAL",
        "INST",
        "OBJ",
        "NEWOBJ",
        "NEWOBJ_EX",
        "REDUCE",
        "BUILD",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
        "NEXT_BUFFER",
        "READONLY_BUFFER",
    }
)


def _pickle_opcodes(data: bytes) -> list[str] | None:
    """Opcode names if ``data`` parses as one complete pickle, else None. Pure parsing:
    ``pickletools.genops`` decodes opcodes and never executes or imports anything."""
    names: list[str] = []
    try:
        for op, _arg, _pos in pickletools.genops(io.BytesIO(data)):
            names.append(op.name)
            if op.name == "STOP":
                return names
    except Exception:  # noqa: BLE001 - any decoding failure means "not a pickle"
        return None
    return None


def _looks_like_pickle(data: bytes) -> bool:
    if not data:
        return False
    if data[0] == 0x80:  # PROTO opcode: protocol 2+
        return True
    return _pickle_opcodes(data) is not None


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Loads plain containers and scalars only: any attempt to name a global fails."""

    def find_class(self, module: str, name: str):  # noqa: D401
        raise FlightRecorderRefused(f"pickle refers to {module}.{name}; only plain containers and scalars are allowed")

    def persistent_load(self, pid):
        raise FlightRecorderRefused("pickle uses persistent ids; refused")


def _restricted_unpickle(data: bytes) -> Any:
    ops = _pickle_opcodes(data)
    if ops is None:
        raise FlightRecorderError("not a well-formed pickle")
    bad = sorted(set(ops) & _FORBIDDEN_OPCODES)
    if bad:
        raise FlightRecorderRefused(
            "pickle contains code-bearing opcodes (" + ", ".join(bad) + "); refused for safety. " + _HOW_TO_EXPORT
        )
    try:
        return _NoGlobalsUnpickler(io.BytesIO(data)).load()
    except FlightRecorderError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise FlightRecorderError(f"could not read restricted pickle: {type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- validation


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _as_int(v: Any) -> int | None:
    """An int64 from an int, integral float or decimal string; anything else is None."""
    out: int | None = None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        out = v
    elif isinstance(v, float) and v.is_integer():
        out = int(v)
    elif isinstance(v, str) and re.fullmatch(r"-?\d{1,19}", v.strip()):
        out = int(v.strip())
    if out is None or not (_I64_MIN <= out <= _I64_MAX):
        return None
    return out


def _validate(obj: Any) -> dict:
    if not isinstance(obj, dict):
        raise FlightRecorderError(f"a flight-recorder dump is a mapping, got {type(obj).__name__}")
    if not any(k in obj for k in ("entries", "pg_status")):
        raise FlightRecorderError("not a flight-recorder dump: neither 'entries' nor 'pg_status' present")
    entries = obj.get("entries", [])
    if entries is None:
        entries = []
    if not isinstance(entries, (list, tuple)):
        raise FlightRecorderError(f"'entries' must be a list, got {type(entries).__name__}")
    if len(entries) > MAX_ENTRIES:
        raise FlightRecorderError(f"'entries' has {len(entries):,} items (limit {MAX_ENTRIES:,})")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise FlightRecorderError(f"entries[{i}] must be a mapping, got {type(e).__name__}")
    pg_status = obj.get("pg_status", {})
    if pg_status is None:
        pg_status = {}
    if not isinstance(pg_status, dict):
        raise FlightRecorderError(f"'pg_status' must be a mapping, got {type(pg_status).__name__}")
    for k, v in pg_status.items():
        if not isinstance(v, dict):
            raise FlightRecorderError(f"pg_status[{k!r}] must be a mapping, got {type(v).__name__}")
    pg_config = obj.get("pg_config", {})
    if pg_config is not None and not isinstance(pg_config, dict):
        raise FlightRecorderError(f"'pg_config' must be a mapping, got {type(pg_config).__name__}")
    version = obj.get("version")
    if version is not None and not isinstance(version, (str, int, float)):
        raise FlightRecorderError(f"'version' must be a string, got {type(version).__name__}")
    return obj


def load_dump(
    data: bytes | str,
    *,
    max_bytes: int = MAX_DUMP_BYTES,
    allow_restricted_pickle: bool = False,
) -> dict:
    """Read one flight-recorder dump from its bytes: the JSON form. A pickle raises
    ``FlightRecorderRefused`` unless ``allow_restricted_pickle`` (plain containers and scalars only);
    oversize, malformed or non-dump input raises ``FlightRecorderError`` (a ``ValueError``)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    data = bytes(data)
    if len(data) > max_bytes:
        raise FlightRecorderError(f"dump is {len(data):,} bytes, over the {max_bytes:,}-byte limit")
    if data.startswith(b"PK\x03\x04"):
        raise FlightRecorderRefused(
            "dump is a zip archive (torch.save format, which embeds pickles); refused for safety. " + _HOW_TO_EXPORT
        )
    stripped = data.lstrip(b" \t\r\n")
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:].lstrip(b" \t\r\n")
    if stripped[:1] == b"{":
        try:
            obj = json.loads(stripped.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise FlightRecorderError(f"invalid JSON dump: {exc}") from exc
        return _validate(obj)
    if _looks_like_pickle(data):
        if not allow_restricted_pickle:
            raise FlightRecorderRefused(
                "dump is a Python pickle; pickles are refused for safety (unpickling untrusted "
                "data can run arbitrary code). " + _HOW_TO_EXPORT
            )
        return _validate(_restricted_unpickle(data))
    raise FlightRecorderError("not a flight-recorder dump: expected a JSON object")


_RANK_RE = re.compile(r"rank[_\-.]?(\d+)", re.I)


def rank_from_filename(name: str) -> int | None:
    """``nccl_trace_rank_5.json`` -> 5; a bare ``5.json`` -> 5; else None."""
    stem = Path(name).name
    m = _RANK_RE.findall(stem)
    if m:
        return _as_int(int(m[-1]))  # None past int64
    m2 = re.fullmatch(r"(\d+)(?:\.\w+)*", stem)
    return _as_int(int(m2.group(1))) if m2 else None


def load_dump_files(paths: Iterable[str | Path], **kwargs: Any) -> dict[int, dict]:
    """Load one dump per rank; the rank comes from the dump's ``rank`` key if present, else
    from the file name. Files that fail raise (callers decide whether to skip)."""
    out: dict[int, dict] = {}
    for p in paths:
        p = Path(p)
        dump = load_dump(p.read_bytes(), **kwargs)
        rank = _as_int(dump.get("rank"))
        if rank is None:
            rank = rank_from_filename(p.name)
        if rank is None:
            raise FlightRecorderError(f"cannot tell the rank of {p.name}")
        out[rank] = dump
    return out


# --------------------------------------------------------------------------- summaries


def default_pg_id(dump: Mapping) -> str | None:
    """The default process group's id: ``"0"`` when present, else the first in
    ``pg_status`` (then ``pg_config``)."""
    for key in ("pg_status", "pg_config"):
        section = dump.get(key) or {}
        if not isinstance(section, dict) or not section:
            continue
        keys = [str(k) for k in section]
        if "0" in keys:
            return "0"
        for k, v in section.items():  # a config entry tagged default_pg
            if isinstance(v, dict) and v.get("desc") == "default_pg":
                return str(k)
        return keys[0]
    return None


def _entry_pg(e: Mapping) -> str | None:
    if "pg_id" in e and e["pg_id"] is not None:
        return str(e["pg_id"])
    pg = e.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return str(pg[0])
    return None


def _summarize_one(rank: int, dump: Mapping) -> dict:
    pg = default_pg_id(dump)
    entries = [e for e in (dump.get("entries") or []) if isinstance(e, Mapping)]
    if pg is not None and any(_entry_pg(e) is not None for e in entries):
        pg_entries = [e for e in entries if _entry_pg(e) in (pg, None)]
    else:
        pg_entries = entries
    seq_entries = [(s, e) for e in pg_entries if (s := _as_int(e.get("collective_seq_id"))) is not None]

    status: Mapping = {}
    pg_status = dump.get("pg_status") or {}
    if pg is not None and isinstance(pg_status, dict):
        for k, v in pg_status.items():
            if str(k) == pg and isinstance(v, Mapping):
                status = v
                break

    def from_entries(states: tuple[str, ...]) -> int | None:
        vals = [s for s, e in seq_entries if str(e.get("state", "")).lower() in states]
        return max(vals) if vals else None

    last_enqueued = _as_int(status.get("last_enqueued_collective"))
    last_started = _as_int(status.get("last_started_collective"))
    last_completed = _as_int(status.get("last_completed_collective"))
    if not status:  # no pg_status: derive from the ring buffer
        last_enqueued = from_entries(("scheduled", "started", "completed"))
        last_started = from_entries(("started", "completed"))
        last_completed = from_entries(("completed",))

    last = max(seq_entries, key=lambda t: t[0]) if seq_entries else (None, None)
    last_seq, last_e = last
    return {
        "rank": rank,
        "pg_id": pg,
        "last_enqueued": last_enqueued,
        "last_started": last_started,
        "last_completed": last_completed,
        "last_entry_seq": last_seq,
        "last_entry_name": None if last_e is None else _str_or_none(last_e.get("profiling_name")),
        "last_entry_state": None if last_e is None else _str_or_none(last_e.get("state")),
        "n_entries": len(entries),
    }


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def summarize_dumps(dumps: Mapping[int, Mapping]) -> pl.DataFrame:
    """One row per rank (sorted) for the default process group (``FLIGHT_SUMMARY``): ``last_*`` from
    ``pg_status`` (else the entries), ``last_entry_*`` of the entry with the highest sequence id,
    ``n_entries`` of all entries."""
    # a rank outside int64 cannot be a real rank: such a dump is left out
    ranked = [(_as_int(r), d) for r, d in dumps.items()]
    rows = [_summarize_one(r, d) for r, d in sorted((rd for rd in ranked if rd[0] is not None), key=lambda rd: rd[0])]
    return pl.DataFrame(rows, schema=FLIGHT_SUMMARY, orient="row") if rows else pl.DataFrame(schema=FLIGHT_SUMMARY)


_METRICS = (
    ("last_enqueued", "last enqueued collective"),
    ("last_started", "last started collective"),
    ("last_completed", "last completed collective"),
    ("last_entry_seq", "last recorded collective"),
)


def suspect_rank(dumps: Mapping[int, Mapping]) -> tuple[int | None, str]:
    """``(rank, reason)``: the rank whose last enqueued, started, completed or recorded collective
    (then the last entry's name and state) alone differs from the rest, or alone is lowest.
    ``(None, reason)`` when all agree, with fewer than two dumps, or when none can be singled out."""
    summary = summarize_dumps(dumps)
    n = summary.height
    if n < 2:
        return None, f"need dumps from at least two ranks to compare, got {n}"
    rows = summary.to_dicts()

    for col, label in _METRICS:
        vals = {r["rank"]: r[col] for r in rows if r[col] is not None}
        if len(set(vals.values())) <= 1:
            continue
        counts = Counter(vals.values())
        mode_value, mode_count = counts.most_common(1)[0]
        outliers = sorted(rk for rk, v in vals.items() if v != mode_value)
        low = min(vals.values())
        lowest = [rk for rk, v in vals.items() if v == low]
        if len(vals) >= 3 and len(outliers) == 1 and mode_count == len(vals) - 1:
            rk = outliers[0]
            where = "behind" if vals[rk] < mode_value else "ahead of"
            return rk, (f"rank {rk} {label} is {vals[rk]}, {where} the other {mode_count} ranks at {mode_value}")
        if len(lowest) == 1:
            rk = lowest[0]
            others = sorted(v for r2, v in vals.items() if r2 != rk)
            return rk, (
                f"rank {rk} {label} is {low}, behind every other rank "
                f"(others at {others[0]}" + (f"..{others[-1]}" if others[-1] != others[0] else "") + ")"
            )
        return None, (
            f"{label} differs between ranks but no single rank stands out: ranks {sorted(lowest)} "
            f"are at {low}, {mode_count} ranks at {mode_value}"
        )

    for col, label in (("last_entry_name", "last collective"), ("last_entry_state", "last entry state")):
        vals = {r["rank"]: r[col] for r in rows if r[col] is not None}
        if len(set(vals.values())) <= 1:
            continue
        counts = Counter(vals.values())
        mode_value, mode_count = counts.most_common(1)[0]
        outliers = sorted(rk for rk, v in vals.items() if v != mode_value)
        if len(vals) >= 3 and len(outliers) == 1 and mode_count == len(vals) - 1:
            rk = outliers[0]
            return rk, f"rank {rk} {label} is {vals[rk]!r}, the other {mode_count} ranks have {mode_value!r}"
        return None, f"{label} differs between ranks but no single rank stands out ({dict(sorted(vals.items()))})"

    return None, f"all {n} ranks agree (last completed collective {rows[0]['last_completed']})"
