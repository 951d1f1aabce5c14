"""Find the lines of a block that hold a prefilter literal, in one pass over its bytes (Hyperscan).

The prefilter's ~200 literals are compiled once into a Hyperscan database and run over the
whole block at a few GB/s, the way grep runs over a file: no per-line calls. The caller runs
the exact polars expression on just the lines returned, so the result is the same line for
line.

Literals only. Hyperscan 0.9.1 (the PyPI wheel) was seen to drop matches of regexes: with
``\\{\\d+\\}\\[Hardware Error\\]`` and a longer pattern sharing its start in one database,
``{2}[Hardware Error]`` after a 30-byte line was not reported at all. Literal sets showed no
miss in randomized checks (``tests/test_literal_scan.py``), so regexes (job-log continuation
lines, ``dmesg -H`` stamps, the rules themselves) stay with polars.

Used only where it is exact and available: clean blocks (printable ASCII, tab, no CR), lines
no longer than the overlong limit, and where the ``hyperscan`` wheel exists (x86-64 Linux).
Anywhere else the polars path runs alone.
"""

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
