"""Parse-and-classify throughput against grep and a per-line Python loop, all on the same
generated file in the same run: the ratios are what count (bench/README.md, bench/RESULTS.md).
Usage: python bench/bench_parse.py --mb 1024 (full size), --mb 16 --naive-mb 4 (a smoke run)"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mixed_log import generate  # noqa: E402

from faultline.classify.ruleset import load_ruleset  # noqa: E402

ERE_SPECIAL = re.compile(r"([.\[\]()*+?{}|^$\\])")


def ere_prefilter() -> str:
    """The same literals faultline's prefilter uses, as a grep -E pattern."""
    return "|".join(ERE_SPECIAL.sub(r"\\\1", x) for x in load_ruleset().prefilter_literals)


def time_grep(path: str, pattern: str) -> tuple[float, int]:
    t = time.perf_counter()
    out = subprocess.run(
        ["grep", "-cE", "-e", pattern, path], env={**os.environ, "LC_ALL": "C"}, capture_output=True, text=True
    )
    return time.perf_counter() - t, int(out.stdout.strip() or 0)


def parse_timed(path: str) -> dict:
    """faultline's hot path on one file, in this process: seconds, lines, events."""
    import datetime as dt

    from faultline.ingest.parse import SourceContext, parse_file

    t = time.perf_counter()
    r = parse_file(path, SourceContext(source="bench", kind="kernel", ref_date=dt.date(2026, 11, 24), node="n"))
    s = time.perf_counter() - t
    from measure import self_hwm

    return {"s": s, "lines": r.lines_read, "events": len(r.events), "balanced": r.balanced, "hwm": self_hwm()}


def time_faultline(path: str) -> dict:
    """Run the hot path in a child process so its peak RSS is its own."""
    from measure import run

    m = run([sys.executable, os.path.abspath(__file__), "--parse-child", path])
    res = m.json()
    return {**res, "rss_mb": res["hwm"] / 2**20}


def naive_loop(path: str, limit: int) -> dict:
    """The straightforward script: a Python loop over lines, one combined keyword regex per
    line, and the rules (first match wins) only for lines that hit it. Reads at most
    ``limit`` bytes (whole lines)."""
    rs = load_ruleset()
    keywords = re.compile(rs.prefilter)
    pats = [re.compile(r.pattern) for r in rs.rules]
    n = read = lines = 0
    t = time.perf_counter()
    with open(path, "rb") as f:
        for raw in f:
            read += len(raw)
            if read > limit:
                read -= len(raw)
                break
            lines += 1
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if keywords.search(line):
                for p in pats:
                    if p.search(line):
                        n += 1
                        break
    return {"s": time.perf_counter() - t, "bytes": read, "lines": lines, "matches": n}


def time_naive(path: str, limit: int) -> tuple[float, int]:
    r = naive_loop(path, limit)
    return r["s"], r["bytes"]


def main() -> None:
    if sys.argv[1:2] == ["--parse-child"]:
        print(json.dumps(parse_timed(sys.argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="size of the generated log (MiB)")
    ap.add_argument("--naive-mb", type=int, default=64, help="MiB the per-line Python loop reads")
    ap.add_argument("--file", help="use this log instead of generating one")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    tmp = None
    path = a.file
    if not path:
        tmp = tempfile.NamedTemporaryFile(suffix=".log", delete=False)
        tmp.close()
        path = tmp.name
        t = time.perf_counter()
        generate(path, a.mb << 20)
        print(f"generated {os.path.getsize(path) / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")
    size = os.path.getsize(path)
    try:
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        g_s, g_n = time_grep(path, ere_prefilter())
        f = time_faultline(path)
        n_s, n_read = time_naive(path, a.naive_mb << 20)
    finally:
        if tmp:
            os.unlink(path)
    mb = size / 1e6
    rows = {
        "grep -cE prefilter": (g_s, mb / g_s),
        "faultline parse+classify": (f["s"], mb / f["s"]),
        "python per-line loop": (n_s, n_read / 1e6 / n_s),
    }
    print(f"\n{'contender':28} {'MB/s':>8}")
    for k, (_s, v) in rows.items():
        print(f"{k:28} {v:8.0f}")
    fl = rows["faultline parse+classify"][1]
    ratios = {
        "faultline / grep": fl / rows["grep -cE prefilter"][1],
        "faultline / python loop": fl / rows["python per-line loop"][1],
    }
    for k, v in ratios.items():
        print(f"{k:28} {v:8.2f}x")
    print(
        f"{'faultline peak RSS':28} {f['rss_mb']:8.0f} MiB   lines={f['lines']} events={f['events']} "
        f"balanced={f['balanced']} grep_matches={g_n}"
    )
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"mb": mb, **{k: v[1] for k, v in rows.items()}, **ratios, "rss_mb": f["rss_mb"]}, out, indent=1)


if __name__ == "__main__":
    main()
