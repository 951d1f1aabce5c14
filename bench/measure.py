"""Run a command and measure it from outside: wall time, the peak of the summed RSS of its whole
process tree (sampled), and the bytes the tree read (``rchar``, read by this module as a wrapper
after it reaps the command: ``python bench/measure.py --io-out FILE -- CMD...``)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields start after the last ')'
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 1:
            kids.setdefault(int(rest[1]), []).append(int(name))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, ()):
            out.append(c)
            todo.append(c)
    return out


def mem_bytes(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes; VmHWM is the peak of the process's own address
    space (unlike ``ru_maxrss``, which a child inherits from the process it was forked from)."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return rss, hwm


def self_hwm() -> int:
    """This process's VmHWM in bytes (0 where /proc is missing)."""
    return mem_bytes(os.getpid())[1]


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


class TreeSampler:
    """Peak of the summed RSS of ``pid``'s tree (``pid`` itself too unless ``skip_root``), and
    the largest VmHWM any process of the tree reached (``max_hwm``)."""

    def __init__(
        self, pid: int, interval: float = 0.2, skip_root: bool = False, hwm_exe: str | None = None, tree: bool = True
    ):
        self.pid, self.interval, self.skip_root, self.hwm_exe = pid, interval, skip_root, hwm_exe
        self.tree = tree
        self.peak = 0
        self.peak_procs = 0
        self.max_hwm = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        pids = descendants(self.pid) if self.tree else []
        if not self.skip_root:
            pids.append(self.pid)
        total = 0
        for p in pids:
            rss, hwm = mem_bytes(p)
            total += rss
            if self.hwm_exe is None or _exe_name(p) == self.hwm_exe:
                self.max_hwm = max(self.max_hwm, hwm)
        self.samples += 1
        if total > self.peak:
            self.peak, self.peak_procs = total, len(pids)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Measured:
    cmd: list[str]
    wall_s: float
    rc: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes: peak of the sampled tree sum
    maxrss: int  # bytes: the largest VmHWM sampled in the tree (one process's peak)
    rchar: int | None = None  # bytes: read() bytes of the tree (with io=True)
    extra: dict = field(default_factory=dict)

    def json(self) -> dict:
        """The last line of stdout as JSON (the contenders print their figures that way)."""
        return json.loads(self.stdout.strip().splitlines()[-1])


def run(
    cmd: list[str],
    *,
    env: dict | None = None,
    io: bool = False,
    interval: float = 0.2,
    check: bool = True,
    cwd: str | None = None,
    stderr_to: int | None = None,
    hwm_exe: str | None = None,
    tree: bool = True,
) -> Measured:
    """Run ``cmd``; with ``io`` under the wrapper, so the tree's ``rchar`` is known (the wrapper's
    RSS left out). ``hwm_exe``: count only processes of that executable in ``maxrss`` (not a child
    between fork and exec). ``tree=False``: sample the command's own process only, cheaply."""
    io_file = None
    full = list(cmd)
    if io:
        import tempfile

        fd, io_file = tempfile.mkstemp(prefix="fl_bench_io_", suffix=".json")
        os.close(fd)
        full = [sys.executable, os.path.abspath(__file__), "--io-out", io_file, "--", *cmd]
    t = time.perf_counter()
    proc = subprocess.Popen(
        full,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr_to is None else stderr_to,
        text=True,
    )
    with TreeSampler(proc.pid, interval, skip_root=io, hwm_exe=hwm_exe, tree=tree) as sampler:
        out_box: dict[str, str] = {}
        readers = [threading.Thread(target=lambda: out_box.__setitem__("out", proc.stdout.read()), daemon=True)]
        if proc.stderr is not None:
            readers.append(threading.Thread(target=lambda: out_box.__setitem__("err", proc.stderr.read()), daemon=True))
        for r in readers:
            r.start()
        _, status, _usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        for r in readers:
            r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    rchar = None
    if io_file:
        try:
            with open(io_file) as f:
                info = json.load(f)
            rchar = info["rchar"]
            if proc.returncode == 0:
                proc.returncode = info["rc"]
        except (OSError, ValueError, KeyError):
            pass
        finally:
            os.unlink(io_file)
    m = Measured(
        list(cmd),
        wall,
        proc.returncode,
        out_box.get("out", ""),
        out_box.get("err", ""),
        sampler.peak,
        sampler.max_hwm,
        rchar,
    )
    if check and m.rc != 0:
        raise RuntimeError(f"command failed (exit {m.rc}): {' '.join(cmd)}\n{m.stderr[-4000:]}")
    return m


def _read_io() -> dict[str, int]:
    out = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k.strip()] = int(v)
    return out


def _wrapper(argv: list[str]) -> int:
    io_out = argv[argv.index("--io-out") + 1]
    cmd = argv[argv.index("--") + 1 :]
    before = _read_io()["rchar"]  # the wrapper's own start-up reads, left out
    rc = subprocess.call(cmd)
    after = _read_io()["rchar"]
    with open(io_out, "w") as f:
        json.dump({"rchar": after - before, "rc": rc}, f)
    return rc


def machine() -> dict:
    """CPU count and model, RAM, kernel, Python: the header line of the table."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "cpus": os.cpu_count() or 1,
        "cpu_model": model,
        "ram_bytes": ram,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


if __name__ == "__main__":
    sys.exit(_wrapper(sys.argv[1:]))
