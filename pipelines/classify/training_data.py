"""The learned classifier's training set: the rule examples (labelled with the engine's category,
``unknown`` ones left out), ``curated_examples.yaml``, the real lines of the corpus's dev split,
and benign lines generated from templates. Texts are masked templates; identical pairs kept once."""

from __future__ import annotations

import hashlib
import json
import random
from importlib import resources
from pathlib import Path

import polars as pl
import yaml

from .engine import classify_messages, mask_template
from .ruleset import load_ruleset

CURATED_FILE = "curated_examples.yaml"
EXCLUDED_LABELS = ("unknown",)


def _root(models_dir: str | None):
    return resources.files("faultline.models") if models_dir is None else Path(models_dir)


def mask(texts: pl.Series | list[str]) -> pl.Series:
    """Masked templates of messages (nulls become empty strings)."""
    s = pl.Series("text", texts, dtype=pl.String) if not isinstance(texts, pl.Series) else texts.cast(pl.String)
    return pl.DataFrame({"m": s.fill_null("")}).select(mask_template(pl.col("m")).alias("text")).to_series()


def rule_examples(models_dir: str | None = None) -> pl.DataFrame:
    """(message, label, source) for every rule example; label = the engine's category."""
    root = _root(models_dir)
    msgs, sources = [], []
    for entry in sorted(root.joinpath("rules").iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".yaml"):
            continue
        data = yaml.safe_load(entry.read_bytes())
        for r in data.get("rules", []):
            for ex in r.get("examples") or ():
                msgs.append(ex)
                sources.append(f"rule:{r['id']}")
    cls = classify_messages(pl.Series(msgs, dtype=pl.String), load_ruleset(models_dir))
    df = pl.DataFrame({"message": msgs, "label": cls["category"], "source": sources})
    return df.filter(~pl.col("label").is_in(EXCLUDED_LABELS))


def curated_examples(models_dir: str | None = None) -> pl.DataFrame:
    """(message, label, source) from ``curated_examples.yaml``."""
    data = yaml.safe_load(_root(models_dir).joinpath(CURATED_FILE).read_bytes())
    rows = [(m, cat, "curated") for cat, msgs in data["examples"].items() for m in msgs]
    bad = sorted({c for _, c, _ in rows if c in EXCLUDED_LABELS or c == "benign"})
    if bad:
        raise ValueError(f"{CURATED_FILE}: curated lines must name a failure category, not {bad}")
    return pl.DataFrame(rows, schema=["message", "label", "source"], orient="row")


# --- synthetic benign lines ------------------------------------------------------------------

_HOSTS = ["node-a17", "gpu-b07", "dgx-h100-042", "hgx-node-3", "worker-12", "trn-c01", "compute-r7-n4"]
_USERS = ["alice", "bob", "svc-train", "mlops", "carol"]
_MODELS = ["llama-70b", "gpt-neox-20b", "mixtral-8x7b", "vit-huge", "t5-xxl", "bert-large"]
_PATHS = [
    "/scratch/ckpt/run-42",
    "/lustre/exp/llama/ckpt",
    "/mnt/weka/out/mixtral",
    "/home/alice/runs/vit",
    "s3://ml-ckpt/gpt/step",
    "/gpfs/proj/t5/checkpoints",
]
_IFACES = ["ibp94s0", "ens1f0np0", "ib0", "enp65s0f0np0", "eth0", "bond0"]
_SERVICES = [
    "nvidia-persistenced",
    "nvidia-fabricmanager",
    "slurmd",
    "dcgm-exporter",
    "chronyd",
    "sshd",
    "nvidia-dcgm",
    "munge",
    "node_exporter",
    "containerd",
]
_OPS = ["ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "BROADCAST", "SEND", "RECV"]

_BENIGN_TEMPLATES = [
    "step {n} | loss {f} | lr {e} | grad_norm {f} | tokens/s {n}",
    "iteration {n}/{n} | consumed samples: {n} | elapsed time per iteration (ms): {f} | learning rate: {e} | global batch size: {n} | lm loss: {e}",
    "Epoch {n}: train_loss={f} val_loss={f} val_acc={f}",
    "[{model}] eval at step {n}: perplexity {f}",
    "Saving checkpoint to {path}/step_{n}",
    "Loaded checkpoint from {path}/step_{n} in {f} s",
    "successfully saved checkpoint at iteration {n} to {path}",
    "Resuming {model} training from step {n}",
    "{host}:{n}:{n} [{d}] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "{host}:{n}:{n} [{d}] NCCL INFO Channel {n}/{n} : {d} {d} {d} {d}",
    "{host}:{n}:{n} [{d}] NCCL INFO Using network IB",
    "{host}:{n}:{n} [{d}] NCCL INFO comm 0x{x} rank {n} nranks {n} cudaDev {d} busId {n} - Init COMPLETE",
    "{host}:{n}:{n} [{d}] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.",
    "{host}:{n}:{n} [{d}] NCCL INFO Connected all rings",
    "systemd[1]: Started {svc}.service.",
    "systemd[1]: Starting {svc}.service...",
    "systemd[1]: {svc}.service: Succeeded.",
    "systemd[1]: Started Session {n} of user {user}.",
    "systemd-logind[{n}]: New session {n} of user {user}.",
    "sshd[{n}]: Accepted publickey for {user} from 10.1.2.3 port {n} ssh2",
    "{svc}[{n}]: started, version 3.{n}.{n}",
    "mlx5_core 0000:5e:00.0 {iface}: Link up",
    "mlx5_core 0000:5e:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
    "IPv6: ADDRCONF(NETDEV_CHANGE): {iface}: link becomes ready",
    "{iface}: renamed from eth{d}",
    "nvme nvme{d}: Shutdown timeout set to 10 seconds",
    "nvme nvme{d}: {n}/0/0 default/read/poll queues",
    "EXT4-fs (nvme0n1p{d}): re-mounted. Opts: errors=remount-ro",
    "XFS (md{d}): Ending clean mount",
    "pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200",
    "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.127.05",
    "nvidia-fabricmanager: Successfully configured all the available NVSwitches to route GPU NVLink traffic",
    "dcgm-exporter: health check passed for GPU {d}: 0 errors",
    "gpu-health: GPU {d} ok: temperature {n} C, power {n} W, xid_errors=0, ecc_dbe=0",
    "dcgmi diag -r 1: all tests PASS on {host}, no failures detected",
    "nvidia-smi: GPU {d}: ECC errors: volatile 0, aggregate 0",
    "torch.distributed: process group initialized on {host}, backend nccl, timeout 0:30:00",
    "Setting NCCL_TIMEOUT={n} seconds for {model}",
    "watchdog timeout set to {n} s for rank {n}",
    "retry on failure enabled: max_restarts={d} for job {n}",
    "slurmd[{n}]: launch task StepId={n}.0 request from UID:{n}",
    "slurmd[{n}]: Launching batch job {n} for UID {n}",
    "slurmstepd[{n}]: done with job",
    "_job_complete: JobId={n} done",
    "sched: Allocate JobId={n} NodeList={host} #CPUs={n} Partition=gpu",
    "chronyd[{n}]: Selected source 10.0.0.1",
    "kernel: perf: interrupt took too long ({n} > {n}), lowering kernel.perf_event_max_sample_rate to {n}",
    'audit: type=1400 audit({f}:{n}): apparmor="STATUS" operation="profile_load" name="{svc}"',
    "wandb: Synced {model}-run-{n}: https://wandb.ai/{user}/{model}/runs/{x}",
    "wandb: network error resolved, resuming normal operation",
    "Using {d} GPUs with tensor parallel {d} and pipeline parallel {d} for {model}",
    "Dataloader: {n} shards from {path}, {n} workers",
    "[{op}] benchmark: busbw {f} GB/s algbw {f} GB/s size {n} on {host}",
    "rank {n}: warmup finished in {f} s, throughput {f} TFLOP/s",
    "ib_srp: connection to target 10.1.2.3 re-established after error recovery",
    "ACPI: Added _OSI(Module Device)",
    "Lustre: Mounted scratch-client",
    "nfs: server fs-0{d} OK",
    "CPU{d}: Core temperature/speed normal",
    "ice 0000:31:00.0 {iface}: NIC Link is Up 100 Gbps Full Duplex",
    "Memory cgroup stats for /slurm/uid_{n}/job_{n}: cache:{n}KB rss:{n}KB",
    "{svc}: configuration reloaded, 0 errors, 0 warnings",
    "sacct: JobID {n} COMPLETED ExitCode 0:0 on {host}",
    "healthcheck: {host} passed ({svc}, nvlink, ib, disk): failed=0",
]


def benign_examples(n_per_template: int = 3, seed: int = 0) -> pl.DataFrame:
    """Synthetic benign lines: each template filled ``n_per_template`` times (seeded)."""
    rng = random.Random(seed)
    fill = {
        "n": lambda: str(rng.randint(1, 99999)),
        "d": lambda: str(rng.randint(0, 7)),
        "f": lambda: f"{rng.uniform(0, 100):.3f}",
        "e": lambda: f"{rng.uniform(1, 9):.2f}e-0{rng.randint(3, 6)}",
        "x": lambda: f"{rng.getrandbits(48):x}",
        "host": lambda: rng.choice(_HOSTS),
        "user": lambda: rng.choice(_USERS),
        "model": lambda: rng.choice(_MODELS),
        "path": lambda: rng.choice(_PATHS),
        "iface": lambda: rng.choice(_IFACES),
        "svc": lambda: rng.choice(_SERVICES),
        "op": lambda: rng.choice(_OPS),
    }
    rows = []
    for tpl in _BENIGN_TEMPLATES:
        for _ in range(n_per_template):
            out, i = [], 0
            while i < len(tpl):
                j = tpl.find("{", i)
                if j < 0:
                    out.append(tpl[i:])
                    break
                k = tpl.index("}", j)
                out.append(tpl[i:j])
                out.append(fill[tpl[j + 1 : k]]())
                i = k + 1
            rows.append(("".join(out), "benign", "synthetic_benign"))
    return pl.DataFrame(rows, schema=["message", "label", "source"], orient="row")


def messages(texts: list[str], kinds: list[str]) -> list[str]:
    """The message of each raw line behind its prefix (job output's launcher labels too): what
    the model reads in the pipeline."""
    from ..ingest.prefix import split_prefix

    df = pl.DataFrame({"raw": texts, "kind": kinds}, schema={"raw": pl.String, "kind": pl.String})
    df = df.with_row_index("_i")
    out = []
    for job in (True, False):
        part = df.filter((pl.col("kind") == "job") == job)
        if part.height:
            out.append(part.select("_i", msg=split_prefix(pl.col("raw"), job=job).struct.field("msg")))
    if not out:
        return []
    return pl.concat(out).sort("_i")["msg"].to_list()


def corpus_examples(models_dir: str | None = None) -> pl.DataFrame:
    """(message, label, source) for the real lines of the corpus's dev split that carry their
    meaning alone; ``source`` is ``corpus:<origin>``, so cross-validation keeps a thread together."""
    from .corpus import load, origin

    folder = None if models_dir is None else Path(models_dir) / "corpus"
    # benign lines only where they look like errors: the model reads only what the rules call
    # unknown, which is what error words flag
    recs = [
        r
        for r in load("dev", folder)
        if not r["context"]
        and r["category"] not in (*EXCLUDED_LABELS, "quarantined")
        and (r["category"] != "benign" or r.get("error_looking"))
    ]
    msgs = messages([r["text"] for r in recs], [r["kind"] for r in recs])
    rows = [(m, r["category"], "corpus:" + origin(r["source"])) for m, r in zip(msgs, recs)]
    return pl.DataFrame(rows, schema=["message", "label", "source"], orient="row")


def cv_groups(sources: pl.Series, texts: pl.Series) -> pl.Series:
    """The cross-validation group of each example: its corpus origin or rule, else the line itself."""
    one = sources.str.starts_with("corpus:") | sources.str.starts_with("rule:")
    return pl.select(pl.when(one).then(sources).otherwise(sources + "\x1f" + texts)).to_series()


def build_training_set(models_dir: str | None = None) -> pl.DataFrame:
    """Columns ``text`` (masked template), ``label``, ``source``, ``message``; one row per
    distinct (text, label), sorted, so the same data always gives the same frame and hash."""
    df = pl.concat(
        [rule_examples(models_dir), curated_examples(models_dir), corpus_examples(models_dir), benign_examples()]
    )
    df = df.with_columns(text=mask(df["message"])).filter(pl.col("text").str.strip_chars() != "")
    # sources ranked so that a curated line wins a tie with a rule example of the same template
    df = df.sort("source", "message").unique(["text", "label"], keep="first", maintain_order=True).sort("label", "text")
    return df.select("text", "label", "source", "message")


def training_data_sha256(df: pl.DataFrame) -> str:
    """Content hash of the (text, label) pairs, order-independent."""
    pairs = sorted(zip(df["text"].to_list(), df["label"].to_list()))
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
