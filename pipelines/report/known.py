"""Known vs new: where the report will tell an issue it has seen before (a ticket open, a
fix pending) from a new one. There is no registry of known issues yet, so every item is new;
the page shows the column, and a registry only has to fill ``known`` here."""

from __future__ import annotations

from typing import Any


def annotate(kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` (of ``kind``: ``node`` for drain/ticket rows, ``signature``) each with
    ``known``: the known issue it matches (None: new)."""
    for item in items:
        item["known"] = None
    return items
