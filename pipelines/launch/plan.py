"""Which partitions each Dagster run of a batch covers, so that the workers finish together.
A run's bookkeeping costs about a small partition's parse, but workers take whole runs: ``plan``
keeps the cut into rectangles that finishes soonest. Plain Python: planning needs no Dagster."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..ingest.landing import Partition

#: a run's fixed cost, in partitions (bench/RESULTS.md, "Where the fixed cost goes")
RUN_COST = 1.1


def ranges(
    parts: Sequence[Partition],
    max_parts: int,
    max_days: int | None = None,
    day_order: Sequence[str] | None = None,
    cluster_order: Sequence[str] | None = None,
) -> list[list[Partition]]:
    """``parts`` as rectangles of at most ``max_parts`` partitions: each cluster's days cut into
    spans of at most ``max_days``, then neighbouring clusters with the same span merged.
    ``day_order`` / ``cluster_order``: the instance's order of keys (default: sorted)."""
    days = {d: i for i, d in enumerate(day_order if day_order is not None else sorted({p.date for p in parts}))}
    clusters = {
        c: i
        for i, c in enumerate(cluster_order if cluster_order is not None else sorted({p.cluster_key for p in parts}))
    }
    max_parts = max(1, max_parts)
    max_days = max(1, min(max_days or max_parts, max_parts))
    by_cluster: dict[str, list[Partition]] = {}
    for p in parts:
        by_cluster.setdefault(p.cluster_key, []).append(p)
    # spans keyed by their days, in cluster order within each key
    spans: dict[tuple[int, ...], list[tuple[int, list[Partition]]]] = {}
    for key in sorted(by_cluster, key=clusters.__getitem__):
        span: list[Partition] = []
        for p in sorted(by_cluster[key], key=lambda p: days[p.date]):
            if span and (days[p.date] != days[span[-1].date] + 1 or len(span) >= max_days):
                spans.setdefault(tuple(days[q.date] for q in span), []).append((clusters[key], span))
                span = []
            span.append(p)
        spans.setdefault(tuple(days[q.date] for q in span), []).append((clusters[key], span))
    runs: list[tuple[tuple[int, int], list[Partition]]] = []  # ((first cluster, first day), run)
    for day_key, group in spans.items():
        run: list[Partition] = []
        last = None
        for c, span in group:
            if run and (c != last + 1 or len(run) + len(span) > max_parts):
                runs.append(((clusters[run[0].cluster_key], day_key[0]), run))
                run = []
            run = run + span
            last = c
        runs.append(((clusters[run[0].cluster_key], day_key[0]), run))
    return [run for _, run in sorted(runs, key=lambda r: r[0])]


def makespan(sizes: Sequence[int], workers: int, run_cost: float = RUN_COST) -> float:
    """When the last of ``workers`` finishes, taking runs of ``sizes`` largest first, each
    worker the next run as soon as it is free (a process pool's queue)."""
    free = [0.0] * max(1, workers)
    for n in sorted(sizes, reverse=True):
        heapq.heapreplace(free, free[0] + n + run_cost)
    return max(free)


def _candidates(limit: int) -> list[int]:
    return sorted(
        {n for n in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 31, 32, 40, 48, 56, 64) if n <= limit}
        | {limit}
    )


def plan(
    parts: Sequence[Partition],
    workers: int,
    max_parts: int,
    day_order: Sequence[str] | None = None,
    cluster_order: Sequence[str] | None = None,
    run_cost: float = RUN_COST,
) -> list[list[Partition]]:
    """The runs for ``parts`` on ``workers`` workers, at most ``max_parts`` partitions each,
    largest first (the order to submit them in). See the module docstring."""
    if not parts:
        return []
    limit = max(1, min(max_parts, len(parts)))
    best: tuple[float, int] | None = None
    chosen: list[list[Partition]] = []
    for max_days in _candidates(limit):
        for cap in [c for c in _candidates(limit) if c >= max_days]:
            runs = ranges(parts, cap, max_days, day_order, cluster_order)
            score = (round(makespan([len(r) for r in runs], workers, run_cost), 6), len(runs))
            if best is None or score < best:
                best, chosen = score, runs
    return sorted(chosen, key=len, reverse=True)
