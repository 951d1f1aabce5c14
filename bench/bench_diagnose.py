"""faultline diagnose on a large generated job log ending in a real failure, against grep -cE
on the same file (wall and CPU time); bench/README.md. Usage:
python bench/bench_diagnose.py [--mb 100] [--reps 3] [--workdir DIR]"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
FAILURE = HERE.parent / "tests" / "fixtures" / "jobs" / "dev" / "kohya-1434-ecc-2xh100-watchdog" / "output.log"
LINES = [
    "{host}:{pid}:{tid} [{d}] NCCL INFO Channel {d2}/32 : {d}[{d}] -> {d3}[{d3}] via P2P/CUMEM/read",
    "{host}:{pid}:{tid} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.2.3<0>",
    "[rank{r}]:2026-11-24 03:14:07,123 - train - INFO - step {n} loss 2.{n} lr 3.0e-04 grad_norm 0.{d2} tokens/s {n}",
    "[rank{r}]:Epoch 0:  {d2}%|####      | {n}/120000 [1:02:03<2:04:05, 16.0it/s, loss=2.{n}]",
    "[rank{r}]:[W1124 03:14:07.123456789 ProcessGroupNCCL.cpp:4563] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect",
    "[rank{r}]:/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:91: UserWarning: None of the inputs have requires_grad=True.",
]
WEIGHTS = np.array([20, 5, 50, 20, 3, 2]) / 100.0


def generate(path: Path, target_mb: int, seed: int = 0) -> int:
    """Write about ``target_mb`` MB of job output ending in a real failure; returns bytes."""
    rng = np.random.default_rng(seed)
    written = 0
    with open(path, "wb") as f:
        while written < target_mb * 1_000_000:
            n = 20_000
            pick = rng.choice(len(LINES), n, p=WEIGHTS)
            frame = pl.DataFrame(
                {
                    "t": pl.Series([LINES[i] for i in pick]),
                    "r": rng.integers(0, 64, n).astype(str),
                    "d": rng.integers(0, 8, n).astype(str),
                    "d2": rng.integers(10, 99, n).astype(str),
                    "d3": rng.integers(0, 8, n).astype(str),
                    "n": rng.integers(1000, 999999, n).astype(str),
                    "pid": rng.integers(1000, 99999, n).astype(str),
                }
            )
            text = frame.select(
                pl.col("t")
                .str.replace_all("{host}", "node-a17", literal=True)
                .str.replace_all("{tid}", pl.col("pid"), literal=True)
                .str.replace_all("{pid}", pl.col("pid"), literal=True)
                .str.replace_all("{r}", pl.col("r"), literal=True)
                .str.replace_all("{d2}", pl.col("d2"), literal=True)
                .str.replace_all("{d3}", pl.col("d3"), literal=True)
                .str.replace_all("{d}", pl.col("d"), literal=True)
                .str.replace_all("{n}", pl.col("n"), literal=True)
            )["t"]
            data = ("\n".join(text.to_list()) + "\n").encode()
            f.write(data)
            written += len(data)
        tail = FAILURE.read_bytes()
        f.write(tail)
        written += len(tail)
    return written


def _time(cmd: list[str], env=None) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system, all threads) of one command, and its stdout."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode not in (0, 1):  # grep -c exits 1 when nothing matched
        raise RuntimeError(f"{cmd[0]} failed: {res.stderr[-2000:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), res.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", help="where the log goes (default: a temporary folder)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from bench_parse import ere_prefilter

    with tempfile.TemporaryDirectory(prefix="bench-diagnose-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        log = work / f"job-{args.mb}mb.out"
        size = log.stat().st_size if log.exists() else generate(log, args.mb)
        faultline = str(Path(sys.executable).with_name("faultline"))
        diag, grep, verdict = [], [], None
        for _ in range(args.reps):
            *times, out = _time([faultline, "diagnose", str(log), "--format", "json"])
            diag.append(times)
            verdict = json.loads(out)
            *times, _out = _time(["grep", "-cE", ere_prefilter(), str(log)], env={**os.environ, "LC_ALL": "C"})
            grep.append(times)
        (d, dc), (g, gc) = ([statistics.median(x) for x in zip(*runs)] for runs in (diag, grep))
        print(
            f"{size / 1e6:.0f} MB job log: faultline diagnose {d:.2f} s wall, {dc:.2f} s CPU; "
            f"grep -cE prefilter {g:.2f} s wall, {gc:.2f} s CPU; ratio {d / g:.1f}x wall, {dc / gc:.1f}x CPU; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; verdict {verdict['root_cause']} "
            f"rank {verdict['culprit_rank']} at line {verdict['evidence'][0]['line_no']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
