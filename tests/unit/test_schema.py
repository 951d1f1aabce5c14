"""The one schema module: its declarations, ``conform`` and the generated table catalog."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from faultline import schema
from faultline.analytics.build import ANALYTICS_TABLES
from faultline.ingest.lines import OUTPUT_FIELDS

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_catalog_is_generated_from_the_schema():
    assert (ROOT / "docs" / "tables.md").read_text() == schema.markdown()


def test_every_table_is_declared_once_with_its_keys_among_its_columns():
    names = [t.name for t in schema.ALL_TABLES]
    assert len(names) == len(set(names))
    for t in schema.ALL_TABLES:
        cols = [c for c, _, _ in t.columns]
        assert len(cols) == len(set(cols)), t.name
        assert set(t.sort) <= set(cols) and set(t.key) <= set(cols), t.name
    for t in schema.LAKE_TABLES:
        assert t.sort and list(schema.PARTITION) == [c for c in cols_of(t) if c in schema.PARTITION], t.name


def cols_of(t: schema.Table) -> list[str]:
    return [c for c, _, _ in t.columns]


def test_analytics_and_classify_contracts_come_from_the_schema():
    assert ANALYTICS_TABLES == tuple(t.name for t in schema.ANALYTICS_TABLES)
    assert OUTPUT_FIELDS == cols_of(schema.CLASSIFY_JSONL)
    assert {t.name for t in schema.ALL_TABLES if t.public} == {"job_failures", "classify"}


def test_conform_casts_selects_and_refuses_missing_or_extra_columns():
    want = pl.Schema({"a": pl.Int64, "b": pl.Float64})
    got = schema.conform(pl.DataFrame({"b": [None], "a": pl.Series([1], dtype=pl.UInt32)}), want)
    assert got.schema == want and got.rows() == [(1, None)]
    with pytest.raises(ValueError, match=r"t: missing columns \['b'\]"):
        schema.conform(pl.DataFrame({"a": [1]}), want, name="t")
    with pytest.raises(ValueError, match=r"unexpected columns \['c'\]"):
        schema.conform(pl.DataFrame({"a": [1], "b": [1.0], "c": [0]}), want)
    with pytest.raises(pl.exceptions.InvalidOperationError):
        schema.conform(pl.DataFrame({"a": ["x"], "b": [1.0]}), want)  # strict: no silent nulls
