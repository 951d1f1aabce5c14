"""An event's headline: its first line that is not a header the parser joined to it (a GPU
identity line before its Xid), so reports show the line that decided the event."""

from __future__ import annotations

import functools
import re

from ..classify.ruleset import load_ruleset

# DuckDB: headline(text, header_pattern()) in any query over events' raw text or samples
SQL_MACRO = """
CREATE OR REPLACE TEMP MACRO headline(text, headers) AS coalesce(
    list_filter(string_split(text, chr(10)), lambda l: NOT regexp_matches(l, headers))[1],
    split_part(text, chr(10), 1))
"""


@functools.cache
def header_pattern() -> str:
    """One regex for the rules that open an event (one that never matches when none do)."""
    heads = [r.pattern for r in load_ruleset().rules if r.opens]
    return "|".join(f"(?:{p})" for p in heads) or "$^"


def headline(text: str | None) -> str:
    lines = (text or "").split("\n")
    rx = re.compile(header_pattern())
    return next((ln for ln in lines if not rx.search(ln)), lines[0])
