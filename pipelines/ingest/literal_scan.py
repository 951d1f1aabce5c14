"""Find the lines of a block that hold a prefilter literal, in one Hyperscan pass over its bytes.
Literals only (regexes stay with polars); used on clean blocks where the wheel exists, and the
caller runs the exact filter on the lines found (docs/architecture.md, "The parse hot path")."""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import numpy as np

try:
    import hyperscan
except ImportError:  # not on this platform: the polars prefilter does all the work
    hyperscan = None

_local = threading.local()


def available() -> bool:
    return hyperscan is not None


@lru_cache(maxsize=16)
def _database(patterns: tuple[str, ...]):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[p.encode() for p in patterns],
        ids=list(range(len(patterns))),
        elements=len(patterns),
        flags=[0] * len(patterns),
    )
    return db


def _scratch(db):
    """One scratch space per thread and database (Hyperscan's scratch is not shareable)."""
    cache = getattr(_local, "scratch", None)
    if cache is None:
        cache = _local.scratch = {}
    s = cache.get(id(db))
    if s is None:
        s = cache[id(db)] = hyperscan.Scratch(db)
    return s


def line_ends(buf: bytes) -> np.ndarray:
    """Offsets of the newlines of ``buf`` (one per line: ``buf`` ends with a newline)."""
    return np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)


def matching_lines(buf, ends: np.ndarray, literals: tuple[str, ...]) -> np.ndarray:
    """Sorted indices of the lines of ``buf`` (ASCII, one newline per line) holding any of
    ``literals``."""
    db = _database(tuple(re.escape(x) for x in literals))
    hits: list[int] = []
    db.scan(buf, match_event_handler=lambda _id, _frm, to, _flags, _ctx: hits.append(to), scratch=_scratch(db))
    if not hits:
        return np.empty(0, dtype=np.int64)
    # the last byte of a match lies in its line (literals hold no newline)
    pos = np.asarray(hits, dtype=np.int64) - 1
    return np.unique(np.searchsorted(ends, pos, side="left"))
