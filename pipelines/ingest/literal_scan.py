"""Find the lines of a block that can hold a candidate, in one pass over its bytes (Hyperscan).

The prefilter's ~200 literals (and the job-continuation and ``dmesg -H`` patterns) are
compiled once into a Hyperscan database and run over the whole block at a few GB/s, the way
grep runs over a file: no per-line calls. What this returns is a superset of the lines the
polars prefilter keeps (a match inside a line is found in the block too); the caller runs the
exact polars expression on just those lines, so the result is the same line for line.

Used only where it is exact and available: clean blocks (printable ASCII, tab, no CR), lines
no longer than the overlong limit, and where the ``hyperscan`` wheel exists (x86-64 Linux).
Anywhere else the polars path runs alone.

``rules_in`` does the same for the classifier: which rule patterns may match each message
(Hyperscan's prefilter mode: a superset), so the exact regex runs only where it can match.
"""
from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np

try:
    import hyperscan
except ImportError:            # not on this platform: the polars prefilter does all the work
    hyperscan = None

_local = threading.local()


def available() -> bool:
    return hyperscan is not None


@lru_cache(maxsize=16)
def _database(patterns: tuple[str, ...], flags: int | None = None):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    flag = hyperscan.HS_FLAG_MULTILINE if flags is None else flags
    db.compile(expressions=[p.encode() for p in patterns], ids=list(range(len(patterns))),
               elements=len(patterns), flags=[flag] * len(patterns))
    return db


def rules_in(texts: list[str | None], patterns: tuple[str, ...]) -> list[set[int]] | None:
    """For each text, the indices of the patterns that may match it (never fewer than those
    that do); None if Hyperscan cannot compile them (the caller then tries every pattern)."""
    try:
        db = _database(patterns, hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_ALLOWEMPTY)
    except hyperscan.error:
        return None
    scratch = _scratch(db)
    out: list[set[int]] = []
    for text in texts:
        ids: set[int] = set()
        if text is not None:
            db.scan(text.encode("utf-8", "surrogatepass"), match_event_handler=lambda i, *_: ids.add(i), scratch=scratch)
        out.append(ids)
    return out


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


# control bytes other than tab, LF, VT, FF and ESC (CR included): a block holding any is
# not clean, and the caller's exact path reads it
DIRTY = r"[\x00-\x08\x0d-\x1a\x1c-\x1f\x7f]"


def matching_lines(buf, ends: np.ndarray, patterns: tuple[str, ...]) -> np.ndarray | None:
    """Sorted indices of the lines of ``buf`` (ASCII) where any of ``patterns`` (regex syntax
    that Hyperscan and the Rust regex crate read alike) matches; None if ``buf`` holds a
    control byte (``DIRTY``), checked in the same pass."""
    db = _database((*patterns, DIRTY))
    dirty_id = len(patterns)
    hits: list[int] = []

    def on_match(pid: int, _frm: int, to: int, _flags: int, _ctx) -> bool | None:
        if pid == dirty_id:
            hits.clear()
            hits.append(-1)
            return True          # stop the scan
        hits.append(to)
        return None

    try:
        db.scan(buf, match_event_handler=on_match, scratch=_scratch(db))
    except hyperscan.ScanTerminated:
        return None
    if hits[:1] == [-1]:
        return None
    if not hits:
        return np.empty(0, dtype=np.int64)
    # the last byte of a match lies in its line (a newline belongs to the line it ends)
    pos = np.asarray(hits, dtype=np.int64) - 1
    return np.unique(np.searchsorted(ends, pos, side="left"))
