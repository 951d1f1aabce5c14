"""End-to-end checks of the fleet simulator: layout, determinism, truth vs logs, real line shapes."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest

from faultline.simulate import SCENARIOS, simulate

UTC = dt.timezone.utc
NAME = re.compile(r"^[A-Za-z0-9._-]+$")
DATE = r"\d{4}-\d\d-\d\d"
ROOT_CATEGORIES = {
    "gpu_bus_lost",
    "gpu_memory",
    "nvlink",
    "gpu_hardware",
    "driver_firmware",
    "user_app",
    "network",
    "host",
    "storage",
    "thermal_power",
    "collective_timeout",
}

# --- kernel-log prefixes (docs/classify.md, "Prefixes and timestamps") -------------------------
KERNEL_FORMATS = {
    "syslog_mono": re.compile(
        r"^(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<hms>\d\d:\d\d:\d\d) (?P<host>[\w.-]+) "
        r"kernel: \[ *(?P<mono>\d+\.\d{6})\] (?P<msg>.*)$"
    ),
    "syslog": re.compile(
        r"^(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<hms>\d\d:\d\d:\d\d) (?P<host>[\w.-]+) "
        r"kernel: (?!\[ *\d+\.\d{6}\] )(?P<msg>.*)$"
    ),
    "short_iso": re.compile(r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\+0000 (?P<host>[\w.-]+) kernel: (?P<msg>.*)$"),
    "dmesg_T": re.compile(r"^\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] (?P<msg>.*)$"),
    "dmesg_raw": re.compile(r"^\[ *(?P<mono>\d+\.\d{6})\] (?P<msg>.*)$"),
    "rfc3339": re.compile(
        r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d{6}\+00:00 (?P<host>[\w.-]+) kernel: (?P<msg>.*)$"
    ),
    "dmesg_iso": re.compile(r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),\d{6}\+00:00 (?P<msg>.*)$"),
}
PATHS = [
    re.compile(p)
    for p in (
        r"^inventory\.csv$",
        r"^prices\.csv$",
        r"^_truth/[a-z_]+\.(parquet|json)$",
        rf"^[\w.-]+/[\w.-]+/{DATE}/kernel/[\w.-]+\.(log|log\.gz|boot)$",
        rf"^[\w.-]+/[\w.-]+/{DATE}/slurm/(sacct\.txt|slurmctld\.log)$",
        rf"^[\w.-]+/[\w.-]+/{DATE}/jobs/(?P<id>\d+(_\d+)?)/slurm-(?P=id)\.log$",
        rf"^[\w.-]+/[\w.-]+/{DATE}/jobs/\d+(_\d+)?/flight_recorder/rank_\d+\.json$",
    )
]
SACCT_HEADER = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason"
HOSTLIST = re.compile(r"^([\w.-]+(\[\d+(-\d+)?(,\d+(-\d+)?)*\])?)(,[\w.-]+(\[\d+(-\d+)?(,\d+(-\d+)?)*\])?)*$")
JOB_LINE = re.compile(
    "|".join(
        (
            r"^[\w.-]+:\d+:\d+ \[\d\] (\S+\.cc:\d+ )?NCCL (INFO|WARN) ",  # NCCL
            r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ",  # python logging
            r"^\[rank\d+\]:\[E(\d{4} \d\d:\d\d:\d\d\.\d{9})? ProcessGroupNCCL\.cpp:\d+\] ",  # c10d, torch >= 2.3
            r"^\[E ProcessGroupNCCL\.cpp:\d+\] ",  # c10d, torch 2.1
            r"^[EWI]\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ torch/distributed/",  # torchrun, glog
            r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] torch\.distributed\.",  # torchrun, logging
            r"^(\[rank\d+\]: )?(Traceback|  File |    |[\w.]+(Error|Exception|Interrupt)\b)",  # tracebacks
            r"^(terminate called|  what\(\): |Exception raised from |frame #\d+: )",
            r"^(srun: |slurmstepd: error: )",
            r"^(torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError: |={60}|-{60}|train\.py FAILED|"
            r"Failures:|  <NO_OTHER_FAILURES>|Root Cause \(first observed failure\):|\[0\]:|  (time|host|rank|exitcode|"
            r"error_file|traceback) *: )",
            r"^(CUDA kernel errors|For debugging consider|Compile with `TORCH_USE_CUDA_DSA`|ncclRemoteError: |Last error:|"
            r"NET/IB : |\.\./aten/src/ATen/native/cuda/\w+\.cu:\d+: )",
            # training progress, checkpoint saves and loads (the shapes of models/corpus/dev.jsonl lines)
            r"^\[titan\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - root - INFO - ",  # torchtitan
            r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +\d+/ +\d+ \| consumed samples: ",  # Megatron-LM
            r"^(saving|  successfully saved) checkpoint at iteration +\d+ to |^  successfully loaded checkpoint from ",
            r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[(logging|timer|torch_checkpoint_engine)\.py:\d+:",  # DeepSpeed
            r"^Training epoch \d+, iteration \d+/\d+ \| |^\[NeMo I \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+:\d+\] ",  # NeMo
            r"^Restor(ing states from the checkpoint path|ed all states from the checkpoint) at ",
            r"^\{'loss': [\d.]+, 'grad_norm': |^\[INFO\|(trainer|modeling_utils)\.py:\d+\] \d{4}-",  # HF Trainer
        )
    )
)
JOB_PREFIX = re.compile(r"^(\d+: |\[default\d\]:)")
RANK_PREFIX = re.compile(r"^\[rank\d+\]: ")  # torch >= 2.4 prefixes a rank's uncaught exception lines


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def read_text(p: Path) -> str:
    data = p.read_bytes()
    return (gzip.decompress(data) if p.name.endswith(".gz") else data).decode()


def kernel_variant(lines: list[str]) -> str:
    for name, rx in KERNEL_FORMATS.items():
        if all(rx.match(x) for x in lines):
            return name
    bad = next(x for x in lines if not any(rx.match(x) for rx in KERNEL_FORMATS.values()))
    raise AssertionError(f"kernel line in no known format: {bad!r}")


def parse_kernel(path: Path) -> list[tuple[dt.datetime, str]]:
    """(node-clock time, message) for every line; raw dmesg is placed with the .boot file."""
    lines = read_text(path).splitlines()
    variant = kernel_variant(lines)
    rx = KERNEL_FORMATS[variant]
    folder = dt.date.fromisoformat(path.parent.parent.name)
    out = []
    boots = []
    if variant == "dmesg_raw":
        boot_file = path.parent / (path.name.split(".log")[0] + ".boot")
        boots = [dt.datetime.fromisoformat(x) for x in boot_file.read_text().split()]
        lo = dt.datetime.combine(folder, dt.time(), UTC) - dt.timedelta(hours=3, minutes=30)
        idx, prev_mono = None, None
    for line in lines:
        m = rx.match(line)
        if variant in ("syslog", "syslog_mono"):
            stamp = dt.datetime.strptime(f"{folder.year} {m['mon']} {m['day'].strip()} {m['hms']}", "%Y %b %d %H:%M:%S")
            ts = stamp.replace(tzinfo=UTC)
        elif variant == "dmesg_T":
            ts = dt.datetime.strptime(m["ctime"], "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
        elif variant == "dmesg_raw":
            mono = dt.timedelta(seconds=float(m["mono"]))
            if idx is None:  # the first line belongs to the first boot that puts it inside the day
                idx = next(i for i, b in enumerate(boots) if b + mono >= lo)
            elif mono < prev_mono:  # the counter went back: the node rebooted
                idx += 1
            prev_mono = mono
            ts = boots[idx] + mono
        else:
            ts = dt.datetime.fromisoformat(m["iso"]).replace(tzinfo=UTC)
        out.append((ts, m["msg"]))
    return out


def run(tmp_path_factory, name: str, **kw) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp(name) / "landing"
    return root, simulate(root, **kw)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return run(tmp_path_factory, "demo", scenario="demo", seed=0)


@pytest.fixture(scope="module")
def truth(demo):
    root, _ = demo
    return {
        n: pl.read_parquet(root / "_truth" / f"{n}.parquet")
        for n in ("jobs", "faults", "lemons", "bad_racks", "rates", "skew", "maintenance", "missing_logs", "boots")
    }


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files_of(root)}


# --- API ---------------------------------------------------------------------------------------


def test_scenarios_and_summary(demo):
    assert {"demo", "lottery", "scale"} <= set(SCENARIOS)
    assert SCENARIOS["lottery"].nodes >= 500 and SCENARIOS["lottery"].days >= 30
    assert SCENARIOS["scale"].nodes == 12_500 and SCENARIOS["scale"].days == 1
    root, summary = demo
    for key in ("files", "bytes", "lines", "nodes", "jobs", "failed_jobs", "faults", "seconds"):
        assert summary[key] > 0, key
    assert summary["providers"] == 3 and 90 <= summary["nodes"] <= 110 and summary["days"] == 7
    on_disk = sum(1 for p in files_of(root) if not p.parts[-2] == "_truth")
    assert on_disk == summary["files"]


def test_refuses_to_overwrite(demo, tmp_path):
    root, _ = demo
    with pytest.raises(FileExistsError):
        simulate(root, scenario="demo")
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        simulate(tmp_path, scenario="demo", overwrite=True)
    assert (tmp_path / "precious.txt").exists()


def test_a_fleet_day_without_a_single_fault_still_simulates(tmp_path):
    """A small fleet for one day can draw no fault at all (it crashed once: an empty keep list)."""
    root = tmp_path / "quiet"
    summary = simulate(root, scenario="scale", nodes=50, seed=0)
    assert summary["faults"] == 0 and summary["nodes"] == 50 and summary["jobs"] > 0
    assert any((root / "bluepeak").rglob("*.log*"))


# --- determinism -------------------------------------------------------------------------------


def test_warm_start_is_deterministic_and_starts_mid_run(tmp_path_factory):
    a, _ = run(tmp_path_factory, "warm_a", scenario="scale", nodes=40, seed=3)
    b, _ = run(tmp_path_factory, "warm_b", scenario="scale", nodes=40, seed=3)
    assert digest(a) == digest(b)
    jobs = pl.read_parquet(a / "_truth" / "jobs.parquet")
    start = dt.datetime(2026, 11, 1, tzinfo=UTC)
    assert (jobs["start"] < start).any() and (jobs["end"] > start).all()  # already running at 00:00
    boots = pl.read_parquet(a / "_truth" / "boots.parquet")
    assert (boots.filter(pl.col("reason") == "first")["time"] < start).all()
    raw = sorted(a.glob("*/*/2026-11-01/kernel/*.boot"))
    assert raw and all(dt.datetime.fromisoformat(p.read_text().split()[0]) < start for p in raw)


def test_same_seed_same_bytes_other_seed_differs(demo, tmp_path_factory):
    root, _ = demo
    again, _ = run(tmp_path_factory, "again", scenario="demo", seed=0)
    other, _ = run(tmp_path_factory, "other", scenario="demo", seed=1)
    first = digest(root)
    assert digest(again) == first
    changed = digest(other)
    assert changed != first
    assert changed["inventory.csv"] == first["inventory.csv"]  # same fleet shape, different history
    assert changed["_truth/faults.parquet"] != first["_truth/faults.parquet"]


# --- layout ------------------------------------------------------------------------------------


def test_layout_matches_landing_contract(demo):
    root, _ = demo
    for p in files_of(root):
        rel = p.relative_to(root).as_posix()
        assert any(rx.match(rel) for rx in PATHS), rel
        assert all(NAME.match(part) for part in p.relative_to(root).parts), rel
    inv = pl.read_csv(root / "inventory.csv")
    assert inv.columns[:5] == ["provider", "cluster", "rack", "node", "gpus"]
    assert {"gpu_model", "leaf_switch"} <= set(inv.columns)
    assert inv["node"].is_unique().all() and (inv["gpus"] == 8).all()
    where = {r["node"]: (r["provider"], r["cluster"]) for r in inv.iter_rows(named=True)}
    kernel = [p for p in files_of(root) if p.parent.name == "kernel"]
    assert kernel
    for p in kernel:
        node = p.name.split(".log")[0].removesuffix(".boot")
        assert where[node] == (p.parts[-5], p.parts[-4]), p
    # every cluster has one sacct per day, raw-dmesg clusters ship .boot files, some clusters gzip
    days = {p.parent.parent.name for p in kernel}
    for prov, cl in set(where.values()):
        for d in days:
            assert (root / prov / cl / d / "slurm" / "sacct.txt").exists()
    assert any(p.name.endswith(".log.gz") for p in kernel) and any(p.name.endswith(".boot") for p in kernel)


def test_gzip_is_deterministic(demo):
    root, _ = demo
    gz = next(p for p in files_of(root) if p.name.endswith(".gz"))
    head = gz.read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08" and head[4:8] == b"\x00\x00\x00\x00"  # mtime 0


# --- kernel logs -------------------------------------------------------------------------------


def test_every_kernel_line_has_a_real_prefix_and_clusters_differ(demo):
    root, _ = demo
    per_cluster: dict[str, set[str]] = {}
    for p in files_of(root):
        if p.parent.name == "kernel" and ".log" in p.name:
            lines = read_text(p).splitlines()
            assert lines, p
            per_cluster.setdefault(p.parts[-4], set()).add(kernel_variant(lines))
    assert all(len(v) == 1 for v in per_cluster.values()), per_cluster  # one convention per cluster
    assert set().union(*per_cluster.values()) == set(KERNEL_FORMATS)  # demo shows all seven


def test_kernel_lines_are_in_time_order_and_inside_the_day(demo, truth):
    root, _ = demo
    skew = {r["node"]: r["skew_s"] for r in truth["skew"].iter_rows(named=True)}
    for p in files_of(root)[::7]:
        if p.parent.name != "kernel" or ".log" not in p.name:
            continue
        node = p.name.split(".log")[0]
        parsed = parse_kernel(p)
        times = [t for t, _ in parsed]
        assert times == sorted(times), p
        start = dt.datetime.combine(dt.date.fromisoformat(p.parent.parent.name), dt.time(), UTC)
        shift = dt.timedelta(seconds=skew.get(node, 0.0))
        assert start + shift - dt.timedelta(seconds=1) <= times[0] and times[-1] < start + shift + dt.timedelta(
            days=1, seconds=1
        )


def test_gpu_identity_lines_at_boot(demo, truth):
    root, _ = demo
    inv = pl.read_csv(root / "inventory.csv")
    first_day = sorted({p.parent.name for p in root.glob("*/*/*/kernel")})[0]
    node = inv.row(0, named=True)
    path = next((root / node["provider"] / node["cluster"] / first_day / "kernel").glob(node["node"] + ".log*"))
    msgs = [m for _, m in parse_kernel(path)]
    ident = [i for i, m in enumerate(msgs) if m.startswith("NVRM: GPU at PCI:")]
    assert len(ident) == 8
    for i in ident:
        assert re.match(
            r"^NVRM: GPU at PCI:0000:[0-9a-f]{2}:00: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            msgs[i],
        )
        assert re.match(r"^NVRM: GPU Board Serial Number: \d{13}$", msgs[i + 1])
    assert any(m.startswith("NVRM: loading NVIDIA UNIX") for m in msgs)


def test_each_logged_fault_is_in_the_right_file_at_its_logged_time(demo, truth):
    root, _ = demo
    faults = truth["faults"]
    inv = pl.read_csv(root / "inventory.csv")
    cache: dict[Path, list] = {}
    checked = 0
    for f in faults.iter_rows(named=True):
        kdir = root / f["provider"] / f["cluster"] / f["day"] / "kernel"
        files = list(kdir.glob(f["node"] + ".log*"))
        if not f["logged"]:
            assert f["kind"] == "nccl_hang" or not files or f["signature"] not in read_text(files[0])
            continue
        assert len(files) == 1, (f["fault_id"], kdir)
        parsed = cache.setdefault(files[0], parse_kernel(files[0]))
        want = f["logged_time"].replace(microsecond=0)
        hits = [t.replace(microsecond=0) for t, m in parsed if m == f["signature"]]
        assert want in hits, (f["fault_id"], f["signature"], want, hits[:3])
        checked += 1
    assert checked >= 50
    # the node named in the truth is in the inventory, with its rack
    racks = {(r["node"]): r["rack"] for r in inv.iter_rows(named=True)}
    assert all(racks[r["node"]] == r["rack"] for r in faults.iter_rows(named=True))


def test_fault_lines_use_the_real_shapes(truth):
    sig = truth["faults"].drop_nulls("signature")["signature"].to_list()
    shapes = [
        r"^NVRM: Xid \(PCI:0000:[0-9a-f]{2}:00\): \d+, (pid=\d+, name=python3|pid='<unknown>', name=<unknown>), .+",
        r"^NVRM: Xid \(PCI:0000:[0-9a-f]{2}:00\): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link \d\d \(0x[0-9a-f]+( 0x[0-9a-f]+)+\)$",
        r"^nvidia-nvswitch\d: SXid \(PCI:0000:[0-9a-f]{2}:00\.0\): \d+, (Fatal|Non-fatal|SOE HALTED)",
        r"^mlx5_core 0000:[0-9a-f]{2}:00\.0( ibp\d+s0: Link down|: .+)$",
        r"^pcieport 0000:[0-9a-f]{2}:02\.0: AER: Uncorrected \(Fatal\) error received: ",
        r"^(watchdog: BUG: soft lockup - CPU#\d+ stuck for \d+s! \[python3:\d+\]|INFO: task python3:\d+ blocked for more than \d+ seconds\.)$",
        r"^mce: \[Hardware Error\]: ",
        r"^(Memory cgroup out of memory|Out of memory): Killed process \d+ \(python3\) total-vm:\d+kB",
        r"^(nfs: server [\w-]+ not responding, still trying|LustreError: 11-0: .+ rc = -107|nvme nvme\d: I/O \d+ QID \d+ timeout, aborting)$",
        r"^CPU\d+: Core temperature above threshold, cpu clock throttled \(total events = \d+\)$",
    ]
    for s in sig:
        assert any(re.match(p, s) for p in shapes), s
    got = {k for k in truth["faults"]["category"].unique().to_list()} | {"user_app"}
    assert ROOT_CATEGORIES <= got, ROOT_CATEGORIES - got


def test_bad_rack_flaps_are_correlated_and_lemons_fail_repeatedly(truth):
    br, faults, lemons = truth["bad_racks"], truth["faults"], truth["lemons"]
    assert br.height >= 1 and lemons.height >= 1
    flaps = faults.filter(pl.col("bad_rack"))
    assert flaps.height >= 3
    for _, ep in flaps.group_by("episode"):
        assert ep["rack"].n_unique() == 1 and ep["node"].n_unique() >= 3
        assert (ep["time"].max() - ep["time"].min()) <= dt.timedelta(minutes=4)
    # a lemon fails far more often than an average node of its cluster
    lem = lemons.row(0, named=True)
    per_node = (
        faults.filter((pl.col("cluster") == lem["cluster"]) & (pl.col("origin") == "infra") & ~pl.col("bad_rack"))
        .group_by("node")
        .len()
    )
    lemon_count = per_node.filter(pl.col("node") == lem["node"])["len"].sum()
    others = per_node.filter(pl.col("node") != lem["node"])["len"].sum() / max(1, 13)
    assert lemon_count >= 2 and lemon_count > 3 * others


def test_lemons_say_whether_they_manifested(truth):
    """``n_logged_faults``: the lemon's own faults whose key line reached the logs; it has
    manifested at 3 or more (TRUTH.md, "Which lemons count")."""
    lem, faults = truth["lemons"], truth["faults"]
    own = (
        faults.filter(pl.col("source") == "lemon")
        .group_by("node")
        .agg(n=pl.len(), logged=pl.col("logged").sum().cast(pl.Int64))
    )
    got = lem.join(own, on="node", how="left").with_columns(pl.col("n", "logged").fill_null(0))
    assert got["n_faults"].to_list() == got["n"].to_list()
    assert got["n_logged_faults"].to_list() == got["logged"].to_list()
    assert got["manifested"].to_list() == (got["logged"] >= 3).to_list()
    assert lem.select("node", "n_faults", "n_logged_faults", "manifested").rows() == [("c2-r04-n01", 16, 16, True)]


def test_the_demo_shows_a_lemon_a_bad_rack_a_flood_and_every_root_cause_domain(truth):
    """The demo scenario exercises everything the report and the evaluation look at: its
    memory lemon fails at least ``lemon_min_faults`` times and floods the log with Xid 95s,
    a rack flaps, and failed jobs have hardware, software, user and symptom root causes."""
    lem, faults, jobs = truth["lemons"], truth["faults"], truth["jobs"]
    assert SCENARIOS["demo"].lemon_components == ("hbm",) and SCENARIOS["demo"].lemon_min_faults == 4
    assert lem["component"].to_list() == ["hbm"] and (lem["n_faults"] >= 4).all() and lem["manifested"].all()
    floods = faults.filter(pl.col("burst_lines").is_not_null() & (pl.col("xid") == 95))
    assert floods.height >= 1 and floods["burst_lines"].min() >= 150
    assert truth["bad_racks"].height >= 1
    domains = {"gpu_bus_lost": "hardware", "network": "hardware", "driver_firmware": "software"}
    domains |= {"user_app": "user", "scheduler": "symptom", "collective_timeout": "symptom"}
    causes = set(jobs["root_cause"].drop_nulls().to_list())
    assert {d for c, d in domains.items() if c in causes} == {"hardware", "software", "user", "symptom"}


def test_desync_report_comes_from_the_lowest_rank_that_timed_out(tmp_path):
    """Every rank whose watchdog fired prints the desync report; the log keeps the lowest one's,
    so a job whose rank 0 never joined still names it (seed 2 has such a job)."""
    root = tmp_path / "landing"
    simulate(root, scenario="demo", nodes=16, days=3, seed=2, noise=1000)
    jobs = (
        pl.read_parquet(root / "_truth" / "jobs.parquet")
        .filter((pl.col("failure_kind") == "desync") & pl.col("has_log"))
        .sort("job_id")
    )
    assert jobs.select("job_id", "culprit_rank").rows() == [
        ("107389_4", 0),
        ("214615", 6),
        ("214619", 14),
        ("214660", 7),
    ]
    for j in jobs.iter_rows(named=True):
        reports = [x for x in job_log(root, j) if "Desync debugging" in x]
        reporter = 1 if j["culprit_rank"] == 0 else 0
        assert len(reports) == 1, j["job_id"]
        assert f"Rank {reporter}] Desync debugging: [{j['culprit_rank']}] finished collective #" in reports[0]


def test_skew_shifts_logged_times(truth):
    skew, faults = truth["skew"], truth["faults"]
    assert skew.height >= 1 and (skew["skew_s"].abs() >= 120).all()
    logged = faults.filter(pl.col("logged"))
    delta = (logged["logged_time"] - logged["time"]).dt.total_microseconds() / 1e6 - logged["skew_s"]
    assert delta.abs().max() < 0.01  # logged = true time + skew (+ µs between lines of one event)


def test_every_boot_banner_is_at_its_logged_time(demo, truth):
    """Every node boots in the demo, skewed ones included: the banner carries the node's own clock."""
    root, _ = demo
    boots = (
        truth["boots"]
        .filter(pl.col("day").is_not_null())
        .join(truth["missing_logs"], on=["provider", "cluster", "node", "day"], how="anti")
    )
    skewed = set(truth["skew"]["node"].to_list())
    assert skewed <= set(boots["node"].to_list())
    assert {"first", "maintenance"} <= set(boots["reason"].to_list())
    cache: dict[Path, list] = {}
    for b in boots.iter_rows(named=True):
        path = next((root / b["provider"] / b["cluster"] / b["day"] / "kernel").glob(b["node"] + ".log*"))
        parsed = cache.setdefault(path, parse_kernel(path))
        banners = [t.replace(microsecond=0) for t, m in parsed if m.startswith("Linux version ")]
        assert b["logged_time"].replace(microsecond=0) in banners, (b["node"], b["reason"], b["logged_time"], banners)
        if b["node"] in skewed:
            assert b["logged_time"] != b["time"]


# --- jobs --------------------------------------------------------------------------------------


def sacct_rows(root: Path) -> dict[str, list[str]]:
    rows = {}
    for p in root.glob("*/*/*/slurm/sacct.txt"):
        lines = p.read_text().splitlines()
        assert lines[0] == SACCT_HEADER
        for line in lines[1:]:
            fields = line.split("|")
            assert len(fields) == 14, line
            rows[f"{p.parts[-4]}:{fields[0]}"] = fields
    return rows


def test_sacct_rows_and_steps(demo, truth):
    root, _ = demo
    rows = sacct_rows(root)
    jobs = truth["jobs"]
    assert len([k for k in rows if "." not in k.split(":")[1]]) == jobs.height
    ts = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
    for j in jobs.iter_rows(named=True):
        main = rows[f"{j['cluster']}:{j['job_id']}"]
        assert main[11] == j["state"] and main[12] == j["exit_code"]
        assert HOSTLIST.match(main[4]) and int(main[5]) == j["nnodes"]
        assert f"gres/gpu={j['gpus']}" in main[6]
        assert all(ts.match(x) for x in main[7:10])
        for step in (".batch", ".extern", ".0"):
            assert f"{j['cluster']}:{j['job_id']}{step}" in rows
    states = set(jobs["state"].str.split(" ").list.first().to_list())
    assert {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "PREEMPTED"} <= states
    assert jobs["job_id"].str.contains("_").any()  # array jobs
    assert any("[" in r[4] for r in rows.values())  # compressed node lists
    assert jobs.filter(pl.col("state").str.starts_with("CANCELLED"))["state"].str.contains(r"^CANCELLED by \d+$").all()


def test_job_mix_is_mostly_completed_and_mostly_user_failures(truth):
    jobs = truth["jobs"]
    share = jobs.group_by(pl.col("state").str.split(" ").list.first()).len().with_columns(pl.col("len") / jobs.height)
    frac = dict(share.iter_rows())
    assert 0.45 <= frac["COMPLETED"] <= 0.75
    failed = jobs.filter(pl.col("root_cause").is_not_null() & (pl.col("root_cause") != "scheduler"))
    user = failed.filter(pl.col("root_cause") == "user_app")
    assert user.height > 0.6 * failed.height  # most failures are the user's
    infra = failed.filter(pl.col("root_cause") != "user_app")
    assert infra.height >= 5
    # ... but infrastructure failures hit bigger jobs (Acme: 11% of failed jobs, 82% of GPU time)
    assert infra["gpu_hours"].mean() > user["gpu_hours"].mean()
    assert (jobs["nnodes"] == 1).sum() > jobs.height / 3 and jobs["nnodes"].max() >= 4


def job_log(root: Path, j: dict) -> list[str]:
    text = (
        root / j["provider"] / j["cluster"] / j["log_day"] / "jobs" / j["job_id"] / f"slurm-{j['job_id']}.log"
    ).read_text()
    return [JOB_PREFIX.sub("", x, count=1) for x in text.splitlines()]


CULPRIT_ERROR = {
    "py_exception": r"^(\[rank\d+\]: )?[\w.]+(Error|Exception): ",
    "gpu_oom": r"OutOfMemoryError: CUDA out of memory\. Tried to allocate",
    "xid31": r"RuntimeError: CUDA error: an illegal memory access was encountered",
    "xid13": r"RuntimeError: CUDA error: an illegal memory access was encountered",
    "device_assert": r"RuntimeError: CUDA error: device-side assert triggered",
    "cpu_oom": r"^slurmstepd: error: Detected 1 oom-kill event\(s\) in StepId=\d+\.0",
    "desync": r"Desync debugging: \[\d+\] finished collective #\d+, but didn't join collective #\d+",
}
EFFECT_ERROR = {
    "cuda": r"RuntimeError: CUDA error: (uncorrectable ECC error encountered|unspecified launch failure|"
    r"uncorrectable NVLink error detected during the execution)",
    "nccl_ib": r"NCCL WARN NET/IB : Got completion from peer [\d.]+<\d+> with status=12 ",
    "io": r"OSError: \[Errno \d+\] ",
    "oom_kill": r"exitcode  : -9 \(pid: \d+\)",
}
WATCHDOG = re.compile(
    r"\[Rank (\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=\d+, "
    r"OpType=\w+, NumelIn=\d+, NumelOut=\d+, Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds"
)


def test_failed_job_cascades(demo, truth):
    from faultline.simulate import catalog

    root, _ = demo
    jobs, faults = truth["jobs"], truth["faults"]
    effect = {k.name: k.effect for k in catalog.KINDS}
    failed = jobs.filter(pl.col("state").str.split(" ").list.first().is_in(["FAILED", "OUT_OF_MEMORY", "NODE_FAIL"]))
    assert failed["has_log"].all()  # every failed job has its stdout
    seen = set()
    for j in failed.iter_rows(named=True):
        lines = job_log(root, j)
        text = "\n".join(lines)
        kind = j["failure_kind"]
        if j["state"] == "NODE_FAIL":
            assert "DUE TO NODE FAILURE" in text and f"srun: error: Node failure on {j['culprit_node']}" in text
            seen.add("node_fail")
            continue
        rx = CULPRIT_ERROR.get(kind) or EFFECT_ERROR.get(effect[kind])
        if rx:
            assert any(re.search(rx, x) for x in lines), (j["job_id"], kind)
        if kind == "desync":
            assert any(f"Desync debugging: [{j['culprit_rank']}] finished" in x for x in lines), j["job_id"]
        ranks = {int(m[1]) for m in map(WATCHDOG.search, lines) if m}
        multi = j["nnodes"] > 1
        if multi or j["culprit_missing_from_watchdog"]:
            assert ranks, (j["job_id"], kind)
            assert all(int(m[3]) >= int(m[2]) for m in map(WATCHDOG.search, lines) if m)
            if j["culprit_missing_from_watchdog"] and j["culprit_rank"] is not None:
                assert j["culprit_rank"] not in ranks
            seen.add("watchdog")
        assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: " in text
        assert re.search(r"srun: error: [\w.-]+: task \d+: (Exited with exit code 1|Out Of Memory)", text)
        if j["root_cause"] not in ("user_app",) and j["fault_id"]:
            f = faults.filter(pl.col("fault_id") == j["fault_id"]).row(0, named=True)
            assert f["kills_job"] and f["affected_job_id"] == j["job_id"] and f["node"] == j["culprit_node"]
            assert f["category"] == j["root_cause"]
            if multi:  # the fault precedes the end by the NCCL timeout (the hang)
                assert j["hang_s"] >= 600 and f["time"] < j["end"]
            seen.add("infra")
    assert {"watchdog", "infra"} <= seen


def test_scheduler_endings_in_job_logs(demo, truth):
    root, _ = demo
    jobs = truth["jobs"].filter(pl.col("has_log"))
    expect = {"TIMEOUT": "DUE TO TIME LIMIT ***", "PREEMPTED": "DUE TO PREEMPTION ***"}
    for state, tail in expect.items():
        sel = jobs.filter(pl.col("state") == state)
        assert sel.height
        for j in sel.head(20).iter_rows(named=True):
            assert any(x.startswith("slurmstepd: error: *** JOB ") and x.endswith(tail) for x in job_log(root, j))
    assert truth["jobs"].filter(pl.col("state") == "COMPLETED")["root_cause"].is_null().all()
    assert (truth["jobs"].filter(pl.col("state").is_in(["PREEMPTED"]))["root_cause"] == "scheduler").all()


def test_job_log_lines_use_the_real_shapes(demo, truth):
    root, _ = demo
    logs = [p for p in files_of(root) if p.name.startswith("slurm-") and p.suffix == ".log"]
    assert len(logs) >= 100
    bad = []
    for p in logs[::5]:
        for line in p.read_text().splitlines():
            body = RANK_PREFIX.sub("", JOB_PREFIX.sub("", line, count=1), count=1)
            if not JOB_LINE.match(body):
                bad.append(line)
    assert not bad, bad[:5]
    joined = "\n".join(p.read_text() for p in logs[::3])
    for shape in (
        r"NCCL INFO NCCL version 2\.\d+\.\d+\+cuda\d+\.\d",
        r"NCCL INFO Channel 00/32 :",
        r"Init COMPLETE",
        r"\[titan\] [\d :,-]+ - root - INFO - step: \d+  loss:  [\d.]+  memory: ",
        r"\[Torch\] Checkpoint global_step\d+ is ready now!",
        r"Training epoch 0, iteration \d+/\d+ \| lr: ",
        r"Continuing training from global step \d+",
        r"\[rank\d+\]:\[E\d{4} \d\d:\d\d:\d\d\.\d{9} ProcessGroupNCCL\.cpp:\d+\]",
        r"(?m)^\d+: ",
        r"(?m)^\[default\d\]:",
    ):
        assert re.search(shape, joined), shape


def test_flight_recorder_dumps_point_at_the_culprit(demo, truth):
    root, _ = demo
    with_fr = truth["jobs"].filter(pl.col("flight_recorder"))
    assert with_fr.height >= 1
    kinds = set()
    for j in with_fr.iter_rows(named=True):
        d = root / j["provider"] / j["cluster"] / j["log_day"] / "jobs" / j["job_id"] / "flight_recorder"
        docs = {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in d.glob("rank_*.json")}
        assert sorted(docs) == list(range(j["gpus"]))
        for doc in docs.values():
            assert {"version", "pg_config", "pg_status", "entries"} <= set(doc)
            st = doc["pg_status"]["0"]
            assert {"last_enqueued_collective", "last_started_collective", "last_completed_collective"} <= set(st)
            e = doc["entries"][-1]
            assert {"collective_seq_id", "profiling_name", "state", "time_created_ns", "input_sizes", "frames"} <= set(
                e
            )
        last = {r: doc["pg_status"]["0"]["last_enqueued_collective"] for r, doc in docs.items()}
        odd = {r for r, v in last.items() if v != max(last.values())}
        kinds.add(j["failure_kind"])
        if j["failure_kind"] == "nccl_hang":  # stuck inside the collective: it joined like every rank
            assert odd == set()
        elif j["culprit_rank"] is not None:  # died, or went elsewhere (desync), before it got there
            assert odd == {j["culprit_rank"]}
        else:
            assert len(odd) == 8  # a whole node hung
    assert {"nccl_hang", "desync", "xid79"} <= kinds


def test_slurmctld_lines(demo, truth):
    root, _ = demo
    ctld = sorted(root.glob("*/*/*/slurm/slurmctld.log"))
    assert ctld
    rx = re.compile(
        r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] (sched: Allocate JobId=|_job_complete: JobId=|"
        r"Time limit exhausted for JobId=|_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=|"
        r"error: Nodes [\w.-]+ not responding, setting DOWN|Killing JobId=|update_node: node [\w.-]+ )"
    )
    text = [x for p in ctld for x in p.read_text().splitlines()]
    assert all(rx.match(x) for x in text)
    assert any("not responding, setting DOWN" in x for x in text) == truth["jobs"]["state"].eq("NODE_FAIL").any()


def test_checkpoint_and_progress_lines_agree_with_the_truth(demo, truth):
    """What the marker pass reads from the job logs is what the truth says: each failed job's
    last checkpoint save, and the first progress line of a resubmission on a stack that stamps
    its progress lines."""
    from faultline.analytics.goodput import job_progress
    from faultline.ingest.parse import SourceContext, parse_files

    root, _ = demo
    jobs = truth["jobs"].filter(pl.col("has_log"))
    failed = jobs.filter(pl.col("last_checkpoint").is_not_null()).head(60)
    # stamped progress lines, and a checkpoint load, so a timed first progress line
    resumed = jobs.filter(
        (pl.col("attempt") > 1)
        & pl.col("stack").is_in(["torchtitan", "megatron", "deepspeed"])
        & (pl.col("first_progress") < pl.col("end"))
    )
    picked = pl.concat([failed, resumed.head(40)]).unique("job_id", maintain_order=True)
    stamped = set(resumed.head(40)["job_id"].to_list())
    assert failed.height >= 20 and resumed.height >= 10
    items = []
    for j in picked.iter_rows(named=True):
        path = root / j["provider"] / j["cluster"] / j["log_day"] / "jobs" / j["job_id"] / f"slurm-{j['job_id']}.log"
        ctx = SourceContext(source=str(path), kind="job", ref_date=j["end"].date(), job_id=j["job_id"])
        items.append((path, ctx))
    marks = pl.concat(
        [
            r.markers.with_columns(job_id=pl.lit(c.job_id), provider=pl.lit("p"), cluster=pl.lit("c"))
            for (_p, c), r in zip(items, parse_files(items))
            if r.markers is not None
        ]
    )
    got = {r["job_id"]: r for r in job_progress(marks).to_dicts()}
    for j in picked.iter_rows(named=True):
        g = got[j["job_id"]]
        if j["last_checkpoint"] is not None:
            assert abs((g["last_save"] - j["last_checkpoint"]).total_seconds()) < 3, j["job_id"]
        if j["job_id"] in stamped:
            assert abs((g["first_progress"] - j["first_progress"]).total_seconds()) < 1, j["job_id"]
