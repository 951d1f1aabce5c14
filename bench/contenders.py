"""Parse contenders, each in its own process so its peak RSS is its own; each prints one JSON
line (seconds, bytes and lines it covered).
Usage: python bench/contenders.py parse FILE | naive FILE MAX_BYTES | drain3 FILE MAX_LINES"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_parse import naive_loop, parse_timed  # noqa: E402
from measure import self_hwm  # noqa: E402


def drain3_loop(path: str, max_lines: int) -> dict:
    """Every line (up to ``max_lines``) through Drain3's ``TemplateMiner`` with its default
    configuration and no persistence: the usual open-source log parser."""
    logging.disable(logging.WARNING)  # "config file not found, using defaults"
    from drain3 import TemplateMiner

    miner = TemplateMiner()
    lines = read = 0
    t = time.perf_counter()
    with open(path, "rb") as f:
        for raw in f:
            if lines >= max_lines:
                break
            lines += 1
            read += len(raw)
            miner.add_log_message(raw.decode("utf-8", "replace").rstrip("\n"))
    return {"s": time.perf_counter() - t, "bytes": read, "lines": lines, "clusters": len(miner.drain.clusters)}


def main(argv: list[str]) -> None:
    kind, path = argv[0], argv[1]
    if kind == "parse":
        res = parse_timed(path)
        res["bytes"] = os.path.getsize(path)
    elif kind == "naive":
        res = naive_loop(path, int(argv[2]))
    elif kind == "drain3":
        res = drain3_loop(path, int(argv[2]))
    else:
        raise SystemExit(f"unknown contender {kind!r} (parse, naive, drain3)")
    res["hwm"] = self_hwm()  # this process's own peak RSS (VmHWM)
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1:])
