"""Writes the landing folder: one write call per file, gzip with a fixed header, running totals."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import polars as pl


class Writer:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.files = self.bytes = self.lines = 0
        self.io_seconds = 0.0  # time spent creating and writing files (the rest is generation)
        self._dirs: set[Path] = set()

    def write(self, rel: str, data: bytes, gz: bool = False, lines: int = 0) -> None:
        path = self.root / rel
        raw = len(data)
        if gz:
            data = gzip.compress(data, compresslevel=5, mtime=0)
        clock = time.perf_counter()
        parent = path.parent
        if parent not in self._dirs:
            parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(parent)
        with open(path, "wb") as fh:
            fh.write(data)
        self.io_seconds += time.perf_counter() - clock
        self.files += 1
        self.bytes += raw
        self.lines += lines

    def write_groups(self, frame: pl.DataFrame, path_col: str, line_col: str = "line", gz: bool = False) -> None:
        """``frame`` is sorted; consecutive rows with the same path become one file."""
        if frame.height == 0:
            return
        grouped = frame.group_by(path_col, maintain_order=True).agg(
            pl.col(line_col).str.join("\n").alias("text"), pl.len().alias("n")
        )
        for rel, text, n in grouped.iter_rows():
            self.write(rel, (text + "\n").encode(), gz=gz, lines=n)

    def write_frame(self, rel: str, frame: pl.DataFrame) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(path, compression="zstd", statistics=False)
        self.files += 1
        self.bytes += os.path.getsize(path)
