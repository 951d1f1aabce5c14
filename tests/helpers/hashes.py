"""Content hashes of frames and of a whole lake, independent of row order."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl


def frame_hash(df: pl.DataFrame) -> str:
    """Content hash of a frame, independent of row order."""
    if df.height == 0:
        return hashlib.sha256(str(df.schema).encode()).hexdigest()
    rows = df.hash_rows(seed=7).sort().to_list()
    return hashlib.sha256((str(df.schema) + json.dumps(rows)).encode()).hexdigest()


def lake_hashes(warehouse: Path) -> dict[str, str]:
    """``{table/partition path: content hash}`` of every data file in the lake."""
    out = {}
    for path in sorted((warehouse / "lake").rglob("data.parquet")):
        out[path.parent.relative_to(warehouse / "lake").as_posix()] = frame_hash(pl.read_parquet(path))
    return out
