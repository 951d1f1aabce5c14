"""A big partition's files parsed in several processes: each file's result does not depend on
the others, so the results are the ones one process gives, in the same order."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from ..classify.ruleset import RuleSet, load_ruleset
from .parse import ParseResult, SourceContext, parse_files

WORKERS_ENV = "FAULTLINE_PARSE_WORKERS"
#: below this many bytes a second process costs more (its start) than it saves
SPLIT_BYTES = 192 << 20


def parse_workers() -> int:
    """Processes one partition's parse may use: env ``FAULTLINE_PARSE_WORKERS``, else the CPUs (max 8)."""
    env = os.environ.get(WORKERS_ENV)
    if env:
        return max(1, int(env))
    return min(os.cpu_count() or 1, 8)


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except (OSError, TypeError):  # an object-store path, or gone: counted as small
        return 0


def shares(sizes: list[int], workers: int) -> list[list[int]]:
    """Indices of the files for each worker, largest first to the least loaded (balanced bytes)."""
    load = [0] * workers
    out: list[list[int]] = [[] for _ in range(workers)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        w = min(range(workers), key=lambda w: (load[w], w))
        out[w].append(i)
        load[w] += sizes[i]
    return [sorted(s) for s in out if s]


def _parse_share(items: list[tuple[str, SourceContext]], rs: RuleSet) -> list[ParseResult]:
    os.environ[WORKERS_ENV] = "1"  # no pool inside a pool
    return parse_files(items, rs)


def parse_partition_files(
    items: list[tuple[str | os.PathLike, SourceContext]], rs: RuleSet | None = None, workers: int | None = None
) -> list[ParseResult]:
    """``parse_files``, split across up to ``workers`` processes when the files are big enough."""
    rs = rs or load_ruleset()
    workers = parse_workers() if workers is None else workers
    sizes = [_size(p) for p, _ in items]
    workers = min(workers, len(items), max(1, sum(sizes) // SPLIT_BYTES))
    if workers <= 1 or any(c.full for _, c in items):
        return parse_files(items, rs)
    parts = shares(sizes, workers)
    out: list[ParseResult | None] = [None] * len(items)
    # spawn: polars' threads do not survive fork
    with ProcessPoolExecutor(len(parts), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_parse_share, [items[i] for i in part], rs) for part in parts]
        for part, fut in zip(parts, futures):
            for i, res in zip(part, fut.result()):
                out[i] = res
    return out  # type: ignore[return-value]
