"""The learned models: the shipped unknown-line classifier (integrity, accuracy, rules stay
authoritative), signatures of unknown lines, and node failure profiles."""

from __future__ import annotations

import datetime as dt
import hashlib
import pickle
import shutil
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from faultline.analytics.signatures import node_failure_profiles, unknown_signatures
from faultline.classify import model as M
from faultline.classify.engine import classify_messages
from faultline.classify.ruleset import load_ruleset
from faultline.classify.training_data import build_training_set, curated_examples, cv_groups, mask

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 24, 3, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def shipped():
    return M.load_model()


# --- the shipped model and its metadata ---------------------------------------------------------


def test_shipped_model_matches_its_metadata(shipped):
    meta = M.shipped_meta()
    blob = M._shipped().joinpath(M.MODEL_FILE).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == meta["model_sha256"]
    assert meta["model_bytes"] == len(blob) < 2_000_000
    for key in ("sklearn_version", "features", "training_data_sha256", "n_per_class", "created", "labels"):
        assert meta[key]
    categories = set(load_ruleset().taxonomy.domains)
    assert set(meta["labels"]) == categories - {"unknown"}
    assert shipped.classes == sorted(meta["labels"])
    assert shipped.rule_id == f"model:unknown_classifier@{meta['version']}"
    # the cross-validated figures the model was shipped with
    cv = meta["metrics"]["cv"]
    assert cv["folds"] == 5 and cv["accuracy"] >= 0.7 and cv["macro_f1"] >= 0.7
    assert set(cv["per_class"]) == set(meta["labels"])
    # trained on today's training set, the real corpus included, in folds grouped by source
    assert meta["training_data_sha256"] == M._sha256_pairs(*_pairs(build_training_set()))
    assert cv["scheme"].startswith("StratifiedGroupKFold") and cv["accuracy_by_source"]["corpus"]["n"] >= 700


def _pairs(df):
    return df["text"].to_list(), df["label"].to_list()


def test_cv_groups_keep_a_thread_together():
    df = build_training_set()
    g = df.with_columns(g=cv_groups(df["source"], df["text"]))
    corpus = g.filter(pl.col("source").str.starts_with("corpus:"))
    assert corpus["g"].n_unique() == corpus["source"].n_unique() >= 40
    curated = g.filter(pl.col("source") == "curated")
    assert curated["g"].n_unique() == curated.height  # curated lines stand alone


def test_tampered_or_foreign_model_files_are_refused(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(M._shipped().joinpath(M.MODEL_FILE), good / M.MODEL_FILE)
    assert M.load_model(good).meta["model_sha256"] == M.shipped_meta()["model_sha256"]  # the same bytes load

    bad = tmp_path / "bad"
    bad.mkdir()
    blob = bytearray((good / M.MODEL_FILE).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (bad / M.MODEL_FILE).write_bytes(bytes(blob))
    with pytest.raises(M.ModelIntegrityError):
        M.load_model(bad)

    # a pickle that would run code is never unpickled, even with a metadata file that vouches for it
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (shutil.copy, (str(good / M.MODEL_FILE), str(marker)))

    evil = tmp_path / "evil"
    evil.mkdir()
    payload = pickle.dumps(Evil())
    (evil / M.MODEL_FILE).write_bytes(payload)
    (evil / M.META_FILE).write_text(f'{{"model_sha256": "{hashlib.sha256(payload).hexdigest()}"}}')
    with pytest.raises(M.ModelIntegrityError):
        M.load_model(evil)
    assert not marker.exists()


def test_shipped_file_that_no_longer_matches_its_metadata_is_refused(tmp_path, monkeypatch):
    shutil.copy(M._shipped().joinpath(M.META_FILE), tmp_path / M.META_FILE)
    blob = bytearray(M._shipped().joinpath(M.MODEL_FILE).read_bytes())
    blob[-10] ^= 0x01
    (tmp_path / M.MODEL_FILE).write_bytes(bytes(blob))
    monkeypatch.setattr(M, "_shipped", lambda: tmp_path)
    M.clear_cache()
    try:
        with pytest.raises(M.ModelIntegrityError):
            M.load_model()
    finally:
        monkeypatch.undo()
        M.clear_cache()


# --- training data and accuracy on lines the model never saw ------------------------------------


def test_curated_lines_are_left_to_the_model_and_name_a_cause():
    """No rule names a curated line: each is unknown or only placed by the subsystem it names."""
    cur = curated_examples()
    assert cur.height >= 85
    assert not set(cur["label"]) & {"benign", "unknown"}
    got = classify_messages(cur["message"], load_ruleset())
    both = cur.with_columns(got.select("category", "rule_id"))
    claimed = both.filter((pl.col("category") != "unknown") & ~M.placed_by_subject())
    assert claimed.is_empty(), f"rules now name these curated lines: {claimed.rows()}"
    assert both.filter(M.placed_by_subject()).height >= 20  # NVRM lines: the driver subject


def test_training_texts_are_masked():
    df = build_training_set()
    assert not df["text"].str.contains(r"\b\d+\b").any()
    assert df.select(pl.struct("text", "label").is_unique().all()).item()


def test_accuracy_on_held_out_real_lines():
    """A fresh model trained without a quarter of the corpus origins (by hash; a thread's lines stay together) and
    every 4th curated line classifies them: top-1 accuracy >= 0.75; above the default threshold it
    answers for >= 60% of them, >= 85% correctly."""
    df = build_training_set().with_row_index("i")
    corpus_sources = df.filter(pl.col("source").str.starts_with("corpus:"))["source"].unique().to_list()
    quarter = [s for s in corpus_sources if hashlib.sha256(s.encode()).digest()[0] % 4 == 0]  # stable as sources join
    cur = df.filter(pl.col("source") == "curated").with_row_index("j")
    held = pl.concat([df.filter(pl.col("source").is_in(quarter)), cur.filter(pl.col("j") % 4 == 0).drop("j")])
    assert held.height >= 200
    train = df.filter(~pl.col("i").is_in(held["i"].implode()))
    pipe, metrics = M.train(train["text"], train["label"], cv=0)
    assert "cv" not in metrics and metrics["n_examples"] == train.height
    model = M.LoadedModel(pipe, {"model_sha256": "0" * 64})
    top1 = M.predict(held["message"], threshold=0.0, benign_threshold=0.0, model=model)
    assert (top1["category"] == held["label"]).mean() >= 0.75
    sure = M.predict(held["message"], model=model)
    answered = sure["category"] != "unknown"
    assert answered.mean() >= 0.60
    assert (sure["category"] == held["label"]).filter(answered).mean() >= 0.85


def test_predict_masks_and_thresholds(shipped):
    msgs = pl.Series(
        [
            "NVRM: GPU 3 GSP RPC timeout after 45 s",
            "NVRM: GPU 7 GSP RPC timeout after 12 s",
            "frobnicator widget quux failed",
            None,
            "",
        ]
    )
    out = M.predict(msgs, model=shipped)
    assert out.columns == ["category", "confidence"] and out.height == 5
    assert out["category"].to_list()[:2] == ["gpu_hardware", "gpu_hardware"]
    assert out["confidence"][0] == out["confidence"][1] >= 0.6  # same masked template, same answer
    assert out["category"].to_list()[2:] == ["unknown"] * 3
    assert out["confidence"].to_list()[3:] == [0.0, 0.0]
    assert M.predict(msgs, threshold=1.01, benign_threshold=1.01, model=shipped)["category"].unique().to_list() == [
        "unknown"
    ]
    assert M.predict(pl.Series([], dtype=pl.String), model=shipped).height == 0


# --- the rules stay authoritative ---------------------------------------------------------------


def _events(rows):
    return pl.DataFrame(
        rows,
        schema=["event_id", "node", "category", "domain", "rule_id", "message"],
        orient="row",
    ).with_columns(ts=pl.Series([T0 + dt.timedelta(minutes=i) for i in range(len(rows))]))


def test_apply_model_changes_only_rule_unknown_rows(shipped):
    ev = _events(
        [
            (
                "e1",
                "n1",
                "gpu_memory",
                "hardware",
                "nvrm_xid",
                "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=python3, DBE",
            ),
            # the rules call this network; the model would say storage: the rule wins
            (
                "e2",
                "n1",
                "network",
                "hardware",
                "nccl_net_ib",
                "Lustre: client was evicted, I/O error on /lustre/scratch",
            ),
            ("e3", "n2", "benign", "none", None, "step 1200 loss 2.3417"),
            ("e4", "n2", "unknown", "unknown", "error_words", "NVRM: GPU1 GSP RPC timeout"),
            (
                "e5",
                "n3",
                "unknown",
                "unknown",
                "nccl_system_error",
                "mlx5_core 0000:5e:00.0: firmware fatal error, syndrome 0x8, reloading the device",
            ),
            ("e6", "n3", "unknown", "unknown", "error_words", "frobnicator widget quux failed"),
        ]
    )
    out = M.apply_model(ev, model=shipped)
    assert out.columns == [*ev.columns, "model_confidence"]
    assert out.drop("model_confidence").head(3).equals(ev.head(3))
    assert out["model_confidence"].head(3).is_null().all()
    r4, r5, r6 = (out.row(i, named=True) for i in (3, 4, 5))
    assert (r4["category"], r4["domain"], r4["rule_id"]) == ("gpu_hardware", "hardware", shipped.rule_id)
    assert (r5["category"], r5["rule_id"]) == ("network", shipped.rule_id)
    assert r4["model_confidence"] >= 0.6 and r5["model_confidence"] >= 0.6
    assert (r6["category"], r6["domain"], r6["rule_id"]) == ("unknown", "unknown", "error_words")
    assert r6["model_confidence"] < 0.6
    assert out["event_id"].to_list() == ev["event_id"].to_list()
    # nothing to do, nothing changed
    none = M.apply_model(ev.head(3), model=shipped)
    assert none.drop("model_confidence").equals(ev.head(3)) and none["model_confidence"].is_null().all()
    assert M.apply_model(ev, threshold=1.01, benign_threshold=1.01, model=shipped).drop("model_confidence").equals(ev)


def test_apply_model_overrules_a_subject_placement_where_sure(shipped):
    ev = _events(
        [
            # placed under the driver by the name NVRM; the model reads the GSP timeout as the GPU's
            ("e1", "n1", "driver_firmware", "software", "fallback:gpu_driver", "NVRM: GPU1 GSP RPC timeout"),
            # placed too, and the model is not sure of it: the placement stands
            ("e2", "n1", "driver_firmware", "software", "fallback:gpu_driver", "NVRM: frobnicator quux zorp failed"),
            # a benign fallback entry is a reading, not a guess: left alone
            ("e3", "n2", "benign", "none", "fallback:zero_count", "NVRM: GPU1 GSP RPC timeout, 0 errors"),
        ]
    )
    out = M.apply_model(ev, model=shipped)
    got = out.select("category", "domain", "rule_id").rows()
    assert got == [
        ("gpu_hardware", "hardware", shipped.rule_id),
        ("driver_firmware", "software", "fallback:gpu_driver"),
        ("benign", "none", "fallback:zero_count"),
    ]
    assert out["model_confidence"].is_null().to_list() == [False, False, True]


class _FixedProba:
    """A stand-in pipeline: ``benign`` at 0.7 for texts holding "maybe", else ``storage`` at 0.7;
    its word features know the words of "maybe fine disk failed"."""

    classes_ = np.array(["benign", "storage"])
    named_steps = {
        "features": SimpleNamespace(transformer_list=[("word", TfidfVectorizer().fit(["maybe fine disk failed"]))])
    }

    def predict_proba(self, texts):
        return np.array([[0.7, 0.3] if "maybe" in t else [0.3, 0.7] for t in texts])


def test_calling_a_line_benign_takes_more_certainty_than_naming_its_cause():
    fixed = M.LoadedModel(_FixedProba(), {"model_sha256": "0" * 64})
    msgs = pl.Series(["maybe fine failed", "disk failed"])
    assert M.predict(msgs, model=fixed)["category"].to_list() == ["unknown", "storage"]
    assert M.predict(msgs, benign_threshold=0.6, model=fixed)["category"].to_list() == ["benign", "storage"]


def test_a_line_of_words_the_model_never_saw_gets_no_answer():
    fixed = M.LoadedModel(_FixedProba(), {"model_sha256": "0" * 64})
    msgs = pl.Series(["zork quux failed", "the disk failed", "the zork is on the failed"])
    assert M.known_words(msgs.to_list(), fixed).tolist() == [1, 2, 1]
    out = M.predict(msgs, model=fixed)
    assert out["category"].to_list() == ["unknown", "storage", "unknown"]
    assert out["confidence"].to_list() == pytest.approx([0.7, 0.7, 0.7])


# --- signatures of unknown lines -----------------------------------------------------------------

SIG_LINES = [  # (group, node, message)
    ("gsp", "n1", "NVRM: GPU1 GSP RPC timeout after 6s waiting for function 76"),
    ("gsp", "n2", "NVRM: GPU3 GSP RPC timeout after 12s waiting for function 10"),
    ("gsp_crash", "n3", "NVRM: GPU0 GSP firmware crashed, ucode assertion at 0x1234"),
    ("mlx_fw", "n1", "mlx5_core 0000:5e:00.0: firmware fatal error, syndrome 0x8, reloading"),
    ("mlx_fw", "n2", "mlx5_core 0000:1a:00.0: firmware fatal error, syndrome 0x4, reloading"),
    ("ib_down", "n4", "infiniband mlx5_2: port 1 state changed to DOWN, physical link lost"),
    ("ib_down", "n5", "infiniband mlx5_3: port 1 state changed to DOWN, physical link lost"),
    ("gpud", "n4", "gpud: health check failed for GPU 3: timeout waiting for dcgm"),
    ("gpud", "n6", "gpud: health check failed for GPU 5: timeout waiting for dcgm-exporter"),
    (
        "evict",
        "n6",
        "LustreError: 167-0: scratch-MDT0000-mdc-ffff9a1b2c3d4000: This client was evicted by scratch-MDT0000; "
        "in progress operations using this service will fail.",
    ),
    (
        "evict",
        "n7",
        "LustreError: 167-0: work-MDT0001-mdc-ffff88aa11bb2000: This client was evicted by work-MDT0001; "
        "in progress operations using this service will fail.",
    ),
    ("nvme_ctrl", "n7", "nvme nvme3: Identify Controller failed (-4), device unusable"),
    ("nvme_ns", "n8", "nvme nvme3: Identify Namespace failed (-5)"),
    ("segv", "n8", "Segmentation fault (core dumped)"),
    ("abrt", "n8", "Aborted (core dumped)"),
]


def _sig_events():
    msgs = [m for _, _, m in SIG_LINES]
    ev = pl.DataFrame(
        {
            "node": [n for _, n, _ in SIG_LINES],
            "message": msgs,
            "raw": [f"Nov 24 03:{i:02d}:00 {n} kernel: {m}" for i, (_, n, m) in enumerate(SIG_LINES)],
            "ts": [T0 + dt.timedelta(minutes=i) for i in range(len(SIG_LINES))],
            "category": ["unknown"] * len(SIG_LINES),
            "family": ["nvrm"] * len(SIG_LINES),
        }
    )
    extra = pl.DataFrame(
        {
            "node": ["n1"],
            "message": ["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."],
            "raw": ["x"],
            "ts": [T0],
            "category": ["gpu_bus_lost"],
            "family": ["nvrm"],
        }
    )
    return pl.concat([ev, extra]).with_columns(template=mask(pl.concat([ev["message"], extra["message"]])))


def test_signatures_group_near_identical_unknown_lines(shipped):
    ev = _sig_events()
    sig = unknown_signatures(ev, model=shipped)
    tpl_group = dict(zip(mask([m for _, _, m in SIG_LINES]).to_list(), [g for g, _, _ in SIG_LINES]))
    got = sorted(sorted({tpl_group[t] for t in ts}) for ts in sig["templates"].to_list())
    want = sorted([g] for g in dict.fromkeys(g for g, _, _ in SIG_LINES))
    assert got == want  # one signature per group, groups never mixed
    assert sig["count"].sum() == len(SIG_LINES)  # only unknown events
    assert sig["signature_id"].is_unique().all() and sig["signature_id"].str.len_chars().eq(12).all()
    assert sig["count"].to_list() == sorted(sig["count"].to_list(), reverse=True)
    gsp = sig.filter(pl.col("templates").list.len() == 2, pl.col("template").str.contains("GSP RPC")).row(0, named=True)
    assert gsp["nodes"] == ["n1", "n2"] and gsp["count"] == 2
    assert (gsp["first_seen"], gsp["last_seen"]) == (T0, T0 + dt.timedelta(minutes=1))
    assert gsp["example"].startswith("Nov 24 03:0") and "GSP RPC timeout" in gsp["example"]
    assert gsp["predicted_category"] == "gpu_hardware" and gsp["resolved_by_model"]
    evict = sig.filter(pl.col("template").str.contains("evicted")).row(0, named=True)
    assert evict["predicted_category"] == "storage"
    # deterministic: the same events in another order give the same table
    again = unknown_signatures(ev.reverse(), model=shipped)
    assert again.select("signature_id", "count", "template").equals(sig.select("signature_id", "count", "template"))
    assert unknown_signatures(ev.filter(pl.col("category") != "unknown"), model=shipped).is_empty()


# --- node failure profiles ---------------------------------------------------------------------


def _incidents(spec):
    rows = [(node, cat) for node, cats in spec.items() for cat, n in cats.items() for _ in range(n)]
    return pl.DataFrame(
        {
            "provider": "acme",
            "cluster": "c1",
            "rack": "r1",
            "node": [r[0] for r in rows],
            "category": [r[1] for r in rows],
            "severity": "error",
        }
    )


def test_node_profiles_group_nodes_by_failure_mode():
    spec = {
        "a1": {"gpu_memory": 5},
        "a2": {"gpu_memory": 3, "host": 1},
        "a3": {"gpu_memory": 4},
        "a4": {"gpu_memory": 2},
        "b1": {"network": 4},
        "b2": {"network": 6, "gpu_memory": 1},
        "b3": {"network": 2},
        "c1": {"storage": 2, "host": 2},
        "c2": {"storage": 3, "host": 2},
        "c3": {"storage": 1, "host": 1},
    }
    health = pl.DataFrame(
        {
            "provider": "acme",
            "cluster": "c1",
            "rack": "r1",
            "node": [*spec, "quiet"],
            "rate_per_1k": [float(i) for i in range(len(spec) + 1)],
        }
    )
    prof = node_failure_profiles(_incidents(spec), health)
    assert set(prof["node"]) == set(spec)  # only nodes with incidents
    cl = dict(zip(prof["node"], prof["profile_cluster"]))
    for group in (["a1", "a2", "a3", "a4"], ["b1", "b2", "b3"], ["c1", "c2", "c3"]):
        assert len({cl[n] for n in group}) == 1
    assert len({cl["a1"], cl["b1"], cl["c1"]}) == 3
    row = {r["node"]: r for r in prof.iter_rows(named=True)}
    assert row["a1"]["profile_cluster"] == 0 and row["a1"]["cluster_size"] == 4  # largest first
    assert row["a2"]["dominant_categories"][0] == "gpu_memory"
    assert row["b2"]["dominant_categories"] == ["network"]
    assert set(row["c1"]["dominant_categories"]) == {"storage", "host"}
    assert row["a2"]["n_incidents"] == 4 and row["a2"]["top_share"] == pytest.approx(0.75)
    assert row["b3"]["rate_per_1k"] == 6.0
    again = node_failure_profiles(_incidents(spec).reverse(), health)
    assert again.equals(prof)  # deterministic


def test_node_profiles_small_inputs():
    assert node_failure_profiles(_incidents({})).is_empty()
    one = node_failure_profiles(_incidents({"a1": {"nvlink": 2}}))
    assert one.select("profile_cluster", "cluster_size").row(0) == (0, 1)
    assert one["dominant_categories"].to_list() == [["nvlink"]] and one["rate_per_1k"].is_null().all()


# --- the analytics path: rule verdicts in the lake, model-upgraded categories in the analytics ---


def test_model_upgraded_events_flow_through_the_analytics(tmp_path, shipped):
    from faultline.analytics.build import compute
    from faultline.analytics.rates import covered_days
    from faultline.ingest.landing import read_inventory
    from faultline.ingest.partition import ingest_partition

    day = tmp_path / "acme" / "c1" / "2026-11-24"
    (day / "kernel").mkdir(parents=True)
    (day / "slurm").mkdir()
    (tmp_path / "inventory.csv").write_text(
        "provider,cluster,rack,node,gpus,leaf_switch\n" + "".join(f"acme,c1,r1,n{i},8,leaf1\n" for i in range(1, 5))
    )
    (day / "slurm" / "sacct.txt").write_text(
        "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"
        "100|pretrain|alice|gpu|n[1-2]|2|cpu=16,gres/gpu=16,node=2|2026-11-24T01:00:00|2026-11-24T01:00:00|"
        "2026-11-24T03:24:30|02:24:30|FAILED|1:0|None\n"
    )
    kernel = {
        "n1": [("03:14:07", "NVRM: GPU1 GSP RPC timeout"), ("03:14:30", "NVRM: GPU1 GSP RPC timeout")],
        "n2": [
            ("03:14:07", "NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus."),
            ("05:00:00", "frobnicator widget quux failed"),
        ],
        "n3": [("02:00:00", "ibacm: failed to resolve path to 10.1.2.3: destination unreachable")],
    }
    for node, lines in kernel.items():
        (day / "kernel" / f"{node}.log").write_text("".join(f"Nov 24 {t} {node} kernel: {m}\n" for t, m in lines))
    pt = ingest_partition(tmp_path, "acme", "c1", "2026-11-24")
    lake_events = pt.events
    # the rules' verdict: unknown, or the GSP lines placed under the driver by the name NVRM
    assert lake_events.filter(pl.col("category") == "unknown").height == 2
    assert lake_events.filter(M.placed_by_subject())["category"].to_list() == ["driver_firmware"] * 2

    events = M.apply_model(lake_events, model=shipped)
    by_node = dict(events.group_by("node").agg(pl.col("category").unique().sort()).iter_rows())
    assert by_node == {"n1": ["gpu_hardware"], "n2": ["gpu_bus_lost", "unknown"], "n3": ["network"]}
    tables = compute(
        events, pt.jobs, pt.flight, read_inventory(tmp_path), covered_days([("acme", "c1", dt.date(2026, 11, 24))])
    )
    inc = dict(tables["incidents"].select("node", "category").iter_rows())
    assert inc == {"n1": "gpu_hardware", "n2": "gpu_bus_lost", "n3": "network"}
    assert tables["job_failures"].row(0, named=True)["culprit_node"] == "n2"

    sig = unknown_signatures(lake_events, model=shipped)
    assert sig["count"].to_list() == [2, 1, 1]
    assert sig.filter(pl.col("resolved_by_model"))["predicted_category"].sort().to_list() == ["gpu_hardware", "network"]
    prof = node_failure_profiles(tables["incidents"], tables["node_health"])
    assert sorted(prof["node"]) == ["n1", "n2", "n3"]


def test_train_classifier_command_writes_model_and_metadata(tmp_path):
    import json

    from click.testing import CliRunner

    from faultline.commands.train import train_classifier

    res = CliRunner().invoke(train_classifier, ["--out", str(tmp_path), "--cv", "0", "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / M.META_FILE).read_text())
    blob = (tmp_path / M.MODEL_FILE).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == meta["model_sha256"] and len(blob) < 2_000_000
    assert len(meta["training_data_sha256"]) == 64 and meta["labels"] == sorted(meta["n_per_class"])
    assert meta["features"]["word"]["n_features"] > 0 and meta["features"]["char"]["n_features"] > 0
    assert sum(meta["n_per_class"].values()) == meta["n_examples"]
