"""Lemon nodes, rack correlation on a skewed clock, hang vs desync, and how lemons are scored,
on hand-built partitions of real-format lines over a 30-day window."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from scipy import stats

from faultline.analytics.build import compute
from faultline.analytics.config import DEFAULT, AnalyticsConfig
from faultline.analytics.incidents import _best_shift, clock_offsets
from faultline.analytics.rates import covered_days
from faultline.ingest.landing import read_inventory
from faultline.ingest.partition import ingest_partition
from faultline.simulate import flightrec
from faultline.simulate.evaluate import evaluate

# one cluster, two racks of four 8-GPU nodes, 30 days
INVENTORY = "provider,cluster,rack,node,gpus,leaf_switch\n" + "".join(
    f"acme,c1,{'r1' if i <= 4 else 'r2'},n{i},8,{'leaf1' if i <= 4 else 'leaf2'}\n" for i in range(1, 9)
)
DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(30)]
DBE = (
    "NVRM: Xid (PCI:0000:{pci}:00): 48, pid=1, name=python3, An uncorrectable double bit error (DBE) has been "
    "detected on GPU in the framebuffer at partition 6, subpartition 0."
)
LINK_DOWN = "mlx5_core 0000:5e:00.0 ibp94s0: Link down"
GPU_DAYS = 8 * 8 * 30  # the cluster's exposure in GPU-days
FAMILY = 8 * 8 * 3  # every GPU x the three repeat-fault categories


def landing(root, logs: dict, files: dict | None = None):
    """``logs``: day (of November, or a date) -> node -> [(HH:MM:SS, kernel message)], written as
    BSD syslog; ``files``: day -> extra files (path under the day folder -> text)."""
    root.mkdir(exist_ok=True)
    (root / "inventory.csv").write_text(INVENTORY)
    for day in set(logs) | set(files or {}):
        date = day if isinstance(day, dt.date) else dt.date(2026, 11, day)
        d = root / "acme" / "c1" / date.isoformat()
        (d / "kernel").mkdir(parents=True)
        for node, lines in logs.get(day, {}).items():
            (d / "kernel" / f"{node}.log").write_text(
                "".join(f"{date:%b} {date.day:2d} {t} {node} kernel: {m}\n" for t, m in lines)
            )
        for path, text in (files or {}).get(day, {}).items():
            (d / path).parent.mkdir(parents=True, exist_ok=True)
            (d / path).write_text(text)
    return root


def tables(root, cfg: AnalyticsConfig = DEFAULT, days: list[dt.date] = DAYS) -> dict[str, pl.DataFrame]:
    parts = [ingest_partition(root, "acme", "c1", p.name) for p in sorted((root / "acme" / "c1").iterdir())]
    flight = [p.flight for p in parts if p.flight is not None and p.flight.height]
    return compute(
        pl.concat([p.events for p in parts], how="diagonal_relaxed"),
        pl.concat([p.jobs for p in parts], how="diagonal_relaxed"),
        pl.concat(flight, how="diagonal_relaxed") if flight else None,
        read_inventory(root),
        covered_days([("acme", "c1", d) for d in days]),
        cfg,
    )


def dbes(spec: dict[int, dict[str, str]]) -> dict[int, dict[str, list[tuple[str, str]]]]:
    """day -> node -> GPU bus: one Xid 48 at 03:00."""
    return {
        day: {node: [("03:00:00", DBE.format(pci=pci))] for node, pci in nodes.items()} for day, nodes in spec.items()
    }


def test_two_faults_on_one_gpu_are_a_lemon_where_that_fault_is_rare(tmp_path):
    """No other memory error in the cluster all month: two DBEs on one GPU are far beyond chance."""
    out = tables(landing(tmp_path / "l", dbes({2: {"n1": "18"}, 20: {"n1": "18"}})))
    lem = out["lemon_nodes"]
    assert lem["node"].to_list() == ["n1"]
    row = lem.row(0, named=True)
    expected = 0.5 / (GPU_DAYS - 30) * 30  # leave-one-out: the other 63 GPUs' rate, +0.5
    assert row["evidence_kind"] == "repeat_gpu_fault" and row["action"] == "drain_node"
    assert (
        row["reason"] == f"GPU 0000:18:00 had 2 separate gpu_memory incidents within 30 days vs {expected:.3f} expected"
    )
    assert row["p_value"] == pytest.approx(stats.poisson.sf(1, expected), rel=1e-9)
    assert row["p_value"] <= 0.05 / FAMILY  # Benjamini-Hochberg over every GPU and category


def test_two_faults_on_one_gpu_are_chance_where_that_fault_is_common(tmp_path):
    """Three more DBEs on other GPUs of the cluster that month: two on one GPU is no longer
    significant over the 192 GPU x category tests (p = 0.0015 > 0.05 / 192)."""
    spec = {2: {"n1": "18"}, 20: {"n1": "18"}, 5: {"n2": "3a"}, 9: {"n3": "9a"}, 25: {"n4": "db"}}
    out = tables(landing(tmp_path / "l", dbes(spec)))
    assert out["lemon_nodes"].height == 0
    inc = out["incidents"].filter(pl.col("category") == "gpu_memory")
    assert inc.height == 5 and inc["rack_incident_id"].is_null().all()


def test_a_third_fault_on_the_same_gpu_is_a_lemon_even_where_faults_are_common(tmp_path):
    spec = {2: {"n1": "18"}, 20: {"n1": "18"}, 27: {"n1": "18"}, 5: {"n2": "3a"}, 9: {"n3": "9a"}, 25: {"n4": "db"}}
    out = tables(landing(tmp_path / "l", dbes(spec)))
    lem = out["lemon_nodes"]
    assert lem["node"].to_list() == ["n1"]
    expected = (6 - 3 + 0.5) / (GPU_DAYS - 30) * 30
    assert lem["evidence_kind"][0] == "repeat_gpu_fault"
    assert (
        lem["reason"][0]
        == f"GPU 0000:18:00 had 3 separate gpu_memory incidents within 30 days vs {expected:.3f} expected"
    )


def test_two_faults_a_window_apart_or_on_two_gpus_are_not_a_repeat(tmp_path):
    """n2: two DBEs on two different GPUs; n3: two on one GPU 59 days apart (30-day window).
    Counted as repeats, n3's pair would be significant (p = 1.9e-4 <= 0.05 / 192). n9 is not in
    the inventory: no exposure, nothing to test it against."""
    logs = {
        dt.date(2026, 11, 2): {
            "n2": [("07:00:00", DBE.format(pci="18"))],
            "n3": [("11:00:00", DBE.format(pci="3b"))],
            "n9": [("05:00:00", DBE.format(pci="18"))],
        },
        dt.date(2026, 11, 20): {"n2": [("09:00:00", DBE.format(pci="9a"))], "n9": [("05:00:00", DBE.format(pci="18"))]},
        dt.date(2026, 12, 31): {"n3": [("03:00:00", DBE.format(pci="3b"))]},
    }
    days = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(61)]
    out = tables(landing(tmp_path / "l", logs), days=days)
    assert out["incidents"].filter(pl.col("category") == "gpu_memory")["node"].value_counts().sort("node").rows() == [
        ("n2", 2),
        ("n3", 2),
        ("n9", 2),
    ]
    assert out["lemon_nodes"].height == 0
    assert stats.poisson.sf(1, (4 - 2 + 0.5) / (8 * 8 * 61 - 61) * 30) <= 0.05 / FAMILY


# three link-flap episodes on rack r2; n8's clock runs 25 minutes slow, so its lines say 04:35
FLAPS = {
    day: {
        "n5": [("05:00:01", LINK_DOWN)],
        "n6": [("05:00:40", LINK_DOWN)],
        "n7": [("05:01:15", LINK_DOWN)],
        "n8": [("04:35:30", LINK_DOWN)],
    }
    for day in (3, 10, 17)
}


def test_a_skewed_node_stays_in_its_racks_episodes(tmp_path):
    out = tables(landing(tmp_path / "l", FLAPS))
    net = out["incidents"].filter(pl.col("category") == "network")
    assert net.height == 12 and net["rack_incident_id"].is_not_null().all()
    assert net["rack_incident_id"].n_unique() == 3 and net["rack_nodes"].to_list() == [4] * 12
    assert out["lemon_nodes"].height == 0
    assert out["node_health"].filter(pl.col("node") == "n8")["incidents"].to_list() == [0]
    hot = out["rack_hotspots"].filter(pl.col("rack") == "r2").row(0, named=True)
    assert (hot["correlated_incidents"], hot["max_nodes_together"], hot["action"]) == (3, 4, "check_network")


def test_without_the_clock_correction_the_skewed_node_would_be_a_lemon(tmp_path):
    out = tables(landing(tmp_path / "l", FLAPS), AnalyticsConfig(clock_offset_min_support=99))
    assert out["lemon_nodes"]["node"].to_list() == ["n8"]
    assert out["node_health"].filter(pl.col("node") == "n8")["incidents"].to_list() == [3]


def test_clock_offset_is_the_median_lag_to_the_rack(tmp_path):
    out = tables(landing(tmp_path / "l", FLAPS))
    inc = out["incidents"].with_columns(
        sev=pl.col("severity").replace_strict({"info": 0, "warning": 1, "error": 2, "critical": 3}),
        _domain_key=pl.col("leaf_switch"),
    )
    off = clock_offsets(inc)
    # n8 lags n5, n6, n7 by 1471, 1510 and 1545 s in each episode; the in-step nodes get no shift
    assert off.rows() == [("acme", "c1", "n8", 1_510_000_000)]


WATCHDOG = (
    "[rank{r}]:[E1124 04:19:30.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 600032 milliseconds before timing out.\n"
)
SACCT = """JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason
200|pretrain|alice|gpu|n[1-2]|2|cpu=16,gres/gpu=16,node=2|2026-11-24T01:00:00|2026-11-24T01:00:00|2026-11-24T04:20:00|03:20:00|FAILED|6:0|None
"""


def hung_job(tmp_path, culprit_joined: bool) -> dict:
    """Job 200 on n1-n2 (16 ranks): every rank but 3 reports the watchdog timeout on collective
    88214, nothing else in the logs; every rank dumped its flight recorder. Rank 3 either never
    enqueued 88214 (a desync) or is stuck inside it like the others (a hang)."""
    t_event = int(dt.datetime(2026, 11, 24, 4, 9, 29, tzinfo=dt.timezone.utc).timestamp() * 1e6)
    files = {
        "slurm/sacct.txt": SACCT,
        "jobs/200/slurm-200.log": "".join(WATCHDOG.format(r=r) for r in range(16) if r != 3),
    }
    for r in range(16):
        files[f"jobs/200/flight_recorder/rank_{r}.json"] = flightrec.dump(
            16, 88214, r == 3 and not culprit_joined, t_event, 600_000
        ).decode()
    out = tables(landing(tmp_path / "l", {}, {24: files}))
    return out["job_failures"].filter(pl.col("job_id") == "200").row(0, named=True)


def test_a_rank_that_never_joined_the_collective_is_a_desync(tmp_path):
    j = hung_job(tmp_path, culprit_joined=False)
    assert (j["root_cause"], j["domain"], j["culprit_node"], j["action"]) == (
        "user_app",
        "user",
        "n1",
        "fix_application",
    )
    assert j["decided_by"].endswith("+flight_recorder_not_joined")


def test_every_rank_inside_the_collective_is_a_hang(tmp_path):
    j = hung_job(tmp_path, culprit_joined=True)
    assert (j["root_cause"], j["domain"], j["culprit_node"], j["action"]) == (
        "collective_timeout",
        "symptom",
        "n1",
        "restart_job",
    )
    assert j["decided_by"].endswith("+missing_rank")


def _write(path, df: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(path)


def scored(tmp_path, lemons: pl.DataFrame, flagged: list[str], faults: pl.DataFrame | None = None) -> dict:
    """Evaluate a truth folder with these lemons against a warehouse that flagged ``flagged``."""
    truth, wh = tmp_path / "truth", tmp_path / "wh"
    _write(truth / "lemons.parquet", lemons)
    _write(
        truth / "faults.parquet",
        faults if faults is not None else pl.DataFrame({"node": ["x"], "source": ["independent"], "logged": [True]}),
    )
    _write(
        truth / "jobs.parquet",
        pl.DataFrame(
            {
                "provider": ["acme"],
                "cluster": ["c1"],
                "job_id": ["1"],
                "root_cause": ["user_app"],
                "culprit_node": ["n1"],
            }
        ),
    )
    _write(
        truth / "bad_racks.parquet",
        pl.DataFrame(schema={"provider": pl.String, "cluster": pl.String, "rack": pl.String}),
    )
    _write(truth / "rates.parquet", pl.DataFrame({"level": ["provider"], "provider": ["acme"], "rate_per_1k": [5.0]}))
    a = wh / "analytics"
    _write(
        a / "job_failures.parquet",
        pl.DataFrame(
            {
                "provider": ["acme"],
                "cluster": ["c1"],
                "job_id": ["1"],
                "root_cause": ["user_app"],
                "culprit_node": ["n1"],
            }
        ),
    )
    _write(
        a / "lemon_nodes.parquet",
        pl.DataFrame(
            {"provider": ["acme"] * len(flagged), "cluster": ["c1"] * len(flagged), "node": flagged},
            schema={"provider": pl.String, "cluster": pl.String, "node": pl.String},
        ),
    )
    _write(
        a / "rack_hotspots.parquet",
        pl.DataFrame(schema={"provider": pl.String, "cluster": pl.String, "rack": pl.String}),
    )
    _write(
        a / "provider_scoreboard.parquet",
        pl.DataFrame(
            {"level": ["provider"], "provider": ["acme"], "rate_per_1k": [5.0], "ci_low": [2.0], "ci_high": [9.0]}
        ),
    )
    return evaluate(truth, wh)["figures"]


def test_recall_is_owed_on_manifested_lemons_and_a_flag_on_any_lemon_is_right(tmp_path):
    """Lemons a, b showed their failing part 3+ times, c and d once or twice. Flagged: a (found),
    c (a real lemon, if a quiet one) and h (healthy)."""
    lemons = pl.DataFrame(
        {
            "provider": ["acme"] * 4,
            "cluster": ["c1"] * 4,
            "node": ["a", "b", "c", "d"],
            "n_faults": [5, 3, 2, 1],
            "n_logged_faults": [5, 3, 2, 1],
            "manifested": [True, True, False, False],
        }
    )
    fig = scored(tmp_path, lemons, ["a", "c", "h"])
    assert (fig["lemon_precision"], fig["lemon_recall"], fig["lemon_recall_all_injected"]) == (0.6667, 0.5, 0.5)
    assert (fig["lemons_manifested"], fig["lemons_injected"], fig["lemons_found"]) == (2, 4, 3)


def test_a_truth_folder_without_the_manifested_column_gets_it_from_the_faults(tmp_path):
    """Older truth folders: the lemon faults whose key line was logged decide (3 needed)."""
    lemons = pl.DataFrame({"provider": ["acme"] * 2, "cluster": ["c1"] * 2, "node": ["a", "b"]})
    faults = pl.DataFrame(
        {
            "node": ["a"] * 3 + ["b"] * 3 + ["h"],
            "source": ["lemon"] * 6 + ["independent"],
            "logged": [True, True, True, True, True, False, True],
        }
    )
    fig = scored(tmp_path, lemons, ["b"], faults)
    assert (
        fig["lemons_manifested"],
        fig["lemon_recall"],
        fig["lemon_recall_all_injected"],
        fig["lemon_precision"],
    ) == (1, 0.0, 0.5, 1.0)


def test_a_share_of_nothing_is_not_a_score(tmp_path):
    """One quiet lemon (never manifested), nothing flagged, no bad rack: precision, recall and
    racks found are undefined (None, n/a), neither a pass nor a miss."""
    lemons = pl.DataFrame(
        {
            "provider": ["acme"],
            "cluster": ["c1"],
            "node": ["a"],
            "n_faults": [1],
            "n_logged_faults": [1],
            "manifested": [False],
        }
    )
    fig = scored(tmp_path, lemons, [])
    assert (fig["lemon_precision"], fig["lemon_recall"], fig["lemon_recall_all_injected"]) == (None, None, 0.0)
    assert fig["bad_racks_found"] is None
    from faultline.commands.evaluate import evaluate as evaluate_cmd

    out = CliRunner().invoke(evaluate_cmd, ["--truth", str(tmp_path / "truth"), "--warehouse", str(tmp_path / "wh")])
    assert out.exit_code == 0, out.output
    lines = {ln.split()[0]: ln for ln in out.output.splitlines()[:15] if ln.strip()}
    assert "n/a" in lines["lemon_precision"] and "MISS" not in lines["lemon_precision"]
    assert "n/a" in lines["lemon_recall"] and "n/a" in lines["bad_racks_found"]


def _shift_by_definition(d, own, tol):
    """The most distinct own incidents with a partner within ``tol`` of a lag; 0 wins ties, then
    the smaller lag, then the negative one."""
    n = {x: len({o for y, o in zip(d, own) if abs(y - x) <= tol}) for x in {0, *d}}
    best = min(n, key=lambda x: (-n[x], x != 0, abs(x), x))
    return best, n[best]


def test_best_shift_is_the_lag_most_incidents_agree_on():
    rng = np.random.default_rng(7)
    for _ in range(500):
        size = int(rng.integers(1, 40))
        d = sorted((rng.integers(-40, 40, size) * int(rng.choice([1, 10]))).tolist())
        own = rng.integers(0, int(rng.integers(1, 10)), size).tolist()
        tol = int(rng.integers(0, 12))
        assert _best_shift(np.array(d), own, tol) == _shift_by_definition(d, own, tol), (d, own, tol)
    # one incident seen at three lags counts once; two incidents agreeing at +30 beat one at 0
    assert _best_shift(np.array([0, 1, 2]), [5, 5, 5], 1) == (0, 1)
    assert _best_shift(np.array([0, 29, 30]), [1, 2, 3], 1) == (29, 2)
