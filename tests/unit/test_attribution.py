"""The causal reading of a failed job's output (docs/analytics.md, "Reading the cascade").

Every job output here is real: a whole case of tests/fixtures/jobs/dev/, or real lines of
those cases and of models/corpus/dev.jsonl put together (named where they are)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from helpers.landing import write

from faultline.analytics.attribution import attribute_failures
from faultline.analytics.build import compute
from faultline.analytics.rates import covered_days
from faultline.classify.engine import classify_messages
from faultline.classify.ruleset import load_ruleset
from faultline.ingest.landing import read_inventory
from faultline.ingest.partition import ingest_partition
from faultline.ingest.sacct import parse_sacct
from faultline.schema import EVENTS

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs" / "dev"
DAY, IB_DAY = "2026-11-24", "2026-09-09"
HEADER = "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"
ROW = "{id}|train|alice|gpu|{nodes}|{n}|cpu=8,gres/gpu={g},node={n}|{day}T01:00:00|{day}T01:00:00|{day}T{end}|{elapsed}|FAILED|1:0|None\n"


def case(name: str) -> str:
    return (CASES / name / "output.log").read_text()


def lines(name: str, *numbers: int) -> str:
    text = case(name).splitlines()
    return "".join(text[i - 1] + "\n" for i in numbers)


# models/corpus/dev.jsonl: stas00/ml-engineering debug/pytorch.md (a desync report) and
# lmzpai/roboMamba#10 (torchrun reporting a worker killed with SIGKILL)
DESYNC = (
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, "
    "NumelOut=4, Timeout(ms)=8000) ran for 8097 milliseconds before timing out.\n"
    " - [0] Timeout at collective: ALLREDUCE, #3\n"
    " - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
    "     [1] finished collective #2, but didn't join collective #3 (count from 1)\n"
)
WORKER_KILLED = (
    "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python\n"
)
WATCHDOG = (
    "[rank{r}]:[E1124 03:14:30.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88214, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 600032 milliseconds before timing out.\n"
)
XID79 = (
    "Nov 24 03:14:07 n9 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus.\n"
)

JOBS = {  # job id -> (nodes, job output)
    # the socket closes first in the paste; the out-of-memory on localRank 3 is the cause
    "1": ("n1", case("nccl-1235-narval-socket-closed-after-cuda-oom")),
    # a device-side assert, then an IB completion error: line order, not "hardware first"
    "2": (
        "n1",
        lines("msswift-8371-device-assert-watchdog-rank11", 1) + lines("nccltests-252-ib-completion-error4", 4),
    ),
    # an IB completion error, then the watchdog's desync report: the job, not the network
    "3": ("n1", lines("ds-2931-inference-2node-ib-error12", 5) + DESYNC),
    # only the surviving peers' socket errors: the peer went away, the cause is in its own log
    "4": ("n1", case("nccl-795-aws-remote-error-after-segfault")),
    # a DataLoader worker killed by a bus error after the shm warnings
    "5": ("n1", case("bs-tr1-shm-bus-error")),
    # shm warnings, then torchrun's report of a worker killed: the exhaustion killed it
    "6": ("n1", lines("bs-tr1-shm-bus-error", 1, 2, 3, 4) + WORKER_KILLED),
    # the checkpoint write failed inside torch.save: storage, not the program's exception
    "7": ("n1", case("colossalai-5798-ckpt-write-failed")),
    # 16 ranks, every one but rank 5 timed out: rank 5 stopped logging
    "8": ("n[1-2]", "".join(WATCHDOG.format(r=r) for r in range(16) if r != 5)),
    # ranks 1 and 2 wait in one collective, rank 0 in another
    "9": ("n1", case("nemo-13562-watchdog-seq-mismatch-wrapped")),
    # two jobs on one node killed by the same Xid 79
    "10": ("n9", lines("msswift-8371-device-assert-watchdog-rank11", 1)),
    "11": ("n9", ""),
    # the deciding NCCL line's process (host:pid) is a rank by the job's own NCCL lines: its ring
    # line, the host's init lines (rank - cudaDev agreeing on two processes), its proxy's
    "13": ("n1", case("nccl-290-horovod-mpirun-shm-fallocate")),
    "14": ("n1", case("ds-2931-inference-2node-ib-error12")),
    "15": ("n1", case("nccltests-185-dgxh100-ibv-modify-qp-unreachable")),
    # ... but not without them: the ring lines gone, or one init line only
    "16": ("n1", lines("nccl-290-horovod-mpirun-shm-fallocate", 7, 8)),
    "17": ("n1", lines("ds-2931-inference-2node-ib-error12", 1, *range(5, 17))),
    # srun's "task 0" on the node the cgroup OOM names is rank 0
    "18": ("n1", case("knet-30-slurm-cgroup-oom")),
    # Ray's worker that vanished without a word, and nothing else: the host, as a SIGKILL
    "19": ("n1", case("ray-47461-release-test-4gpu-worker-died-oom")),
    # an error no rule can place (ncclUnhandledCudaError) still says which node printed it
    "20": ("n1", case("nccl-1029-pdsh-worker-cuda-init-error")),
    # two ranks of one process group time out in different collectives: they are apart, a desync
    "21": ("n1", case("accelerate-3250-fsdp-save-rank0-reducescatter-vs-rank1-allgather")),
    # the same without group names, two ranks only (pastebin.com/QU1mJP8U)
    "22": ("n1", case("pastebin-qu1mjp8u-x2-h100-rank0-allgather-vs-rank1-allgatherbase-desync")),
    # a pipeline's receive and another rank's all-reduce: point-to-point waits are no desync
    "23": ("n1", lines("chitu-80-2node-docker-recv-watchdog-timeout", 1) + WATCHDOG.format(r=0)),
}


@pytest.fixture(scope="module")
def failures(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("landing")
    day = root / "acme" / "c1" / DAY
    write(
        root / "inventory.csv", "provider,cluster,rack,node,gpus\n" + "".join(f"acme,c1,r1,n{i},8\n" for i in (1, 2, 9))
    )
    rows = []
    for job_id, (nodes, text) in JOBS.items():
        n = 2 if "[" in nodes else 1
        rows.append(ROW.format(id=job_id, nodes=nodes, n=n, g=8 * n, day=DAY, end="03:24:30", elapsed="02:24:30"))
        if text:
            write(day / "jobs" / job_id / f"slurm-{job_id}.log", text)
    write(day / "slurm" / "sacct.txt", HEADER + "".join(rows))
    write(day / "kernel" / "n9.log", XID79)
    # a partition of the day nccl-2397's output is stamped with: an IB completion error the job
    # printed, the link going down on its node 27 s later
    day2 = root / "acme" / "c1" / IB_DAY
    row = ROW.format(id="12", nodes="n1", n=1, g=8, day=IB_DAY, end="10:50:00", elapsed="09:50:00")
    write(day2 / "slurm" / "sacct.txt", HEADER + row)
    write(day2 / "jobs" / "12" / "slurm-12.log", lines("nccl-2397-shrink-excluded-ranks-exit-ib-retry", 3))
    write(day2 / "kernel" / "n1.log", "Sep  9 10:47:00 n1 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Link down\n")
    pts = [ingest_partition(root, "acme", "c1", d) for d in (DAY, IB_DAY)]
    days = covered_days([("acme", "c1", dt.date.fromisoformat(d)) for d in (DAY, IB_DAY)])
    tables = [pl.concat([getattr(p, t) for p in pts]) for t in ("events", "jobs", "flight")]
    markers = pl.concat([p.markers for p in pts])
    t = compute(*tables, read_inventory(root), days, markers=markers)["job_failures"]
    assert t.select("provider", "cluster", "job_id").n_unique() == t.height
    return {r["job_id"]: r for r in t.iter_rows(named=True)}


def verdict(j: dict) -> tuple:
    return j["root_cause"], j["decided_by"], j["culprit_node"], j["culprit_rank"]


def test_the_first_specific_error_beats_the_cascade_around_it(failures):
    assert verdict(failures["1"]) == ("user_app", "job:nccl_cuda_failure_app", "ng30903", None)
    assert failures["1"]["symptoms"] == 3 and failures["1"]["action"] == "fix_application"


def test_within_one_output_line_order_decides(failures):
    assert verdict(failures["2"]) == ("user_app", "job:cuda_device_side_assert", None, 11)


def test_a_desync_report_means_the_job_not_the_network(failures):
    j = failures["3"]
    assert verdict(j) == ("user_app", "job:pt_desync_not_joined+desync", "n1", 1)
    assert j["action"] == "fix_application" and len(j["evidence_events"]) == 2


def test_transport_errors_after_a_peer_went_away_are_its_symptom(failures):
    peer = "a100-st-p4d24xlarge-22.luciodelelis-92732890-0458-4f76-8369-c4fee80b23e7.pcluster"
    assert verdict(failures["4"]) == ("unknown", "job:nccl_socket_error+peer_gone", peer, None)


def test_a_worker_killed_by_exhaustion_takes_its_category(failures):
    assert verdict(failures["5"])[:2] == ("host", "job:pt_dataloader_bus_error")  # a rule names it
    assert verdict(failures["6"])[:2] == ("host", "job:pt_dataloader_bus_error")
    assert failures["6"]["action"] == "fix_application"  # the rule's: raise the job's shm limit
    # were the rules to call the shm warning unknown and the worker's death the program's own
    shm = text("bs-tr1-shm-bus-error", 1)
    j = decide([(1, "unknown", shm, None), (5, "user_app", WORKER_KILLED.rstrip("\n"), None)])
    assert verdict(j)[:2] == ("host", "job:rule_1+exhaustion")


def test_a_failed_checkpoint_write_is_storage(failures):
    j = failures["7"]
    assert verdict(j)[:2] == ("storage", "job:pt_checkpoint_write_failed")
    # were a rule to call it the program's exception: the save it failed in makes it storage
    j = decide([(8, "user_app", text("colossalai-5798-ckpt-write-failed", 8), None)])
    assert verdict(j)[:2] == ("storage", "job:rule_8+checkpoint_write")
    assert j["action"] == "check_storage"
    assert "PytorchStreamWriter failed writing file data/1: file write failed" in j["evidence"]


def test_the_rank_that_stopped_logging_is_the_suspect(failures):
    assert verdict(failures["8"]) == ("collective_timeout", "pt_watchdog_collective_timeout+missing_rank", "n1", 5)


def test_ranks_timed_out_in_different_collectives_of_one_group_are_a_desync(failures):
    assert verdict(failures["21"]) == ("user_app", "pt_watchdog_collective_timeout+mismatched_collectives", "n1", None)
    assert verdict(failures["22"])[:2] == ("user_app", "pt_watchdog_collective_timeout+mismatched_collectives")
    assert verdict(failures["23"])[:2] == ("collective_timeout", "pt_watchdog_collective_timeout+missing_rank")


def test_the_rank_in_another_collective_is_the_suspect(failures):
    assert verdict(failures["9"])[:2] == ("collective_timeout", "pt_watchdog_collective_timeout+odd_collective")
    assert failures["9"]["culprit_rank"] == 0


def test_a_fault_on_the_node_beats_the_hardware_error_the_job_printed_about_it(failures):
    assert verdict(failures["12"]) == ("network", "node:mlx5_link_down", "n1", None)


def test_one_kernel_fault_decides_every_job_it_killed(failures):
    for job_id in ("10", "11"):
        assert verdict(failures[job_id])[:3] == ("gpu_bus_lost", "node:nvrm_xid", "n9")


def test_the_deciding_lines_process_is_the_rank_the_output_gives_it(failures):
    """NCCL's [cudaDev] is a device, not a rank: the rank comes from what the output says of
    the same host and pid, and nothing else."""
    assert verdict(failures["13"]) == ("host", "job:nccl_shm_segment_failed", "gpu2-ru7", 1)
    assert verdict(failures["14"]) == ("network", "job:nccl_net_ib_completion_error", "PHLRR4036", 2)
    assert verdict(failures["15"]) == ("network", "job:nccl_ibv_call_failed", "dgxh100-3", 1)
    assert verdict(failures["16"]) == ("host", "job:nccl_shm_segment_failed", "gpu2-ru7", None)
    assert verdict(failures["17"]) == ("network", "job:nccl_net_ib_completion_error", "PHLRR4036", None)
    assert verdict(failures["18"]) == ("user_app", "job:slurmstepd_oom_kill", "gpu20-15", 0)


def test_an_unknown_error_names_the_node_that_printed_it(failures):
    assert verdict(failures["20"]) == ("unknown", "job:nccl_unhandled_cuda_error", "rdma-test-gpu-worker-1", None)


def test_a_ray_worker_that_vanished_without_a_word_is_the_host(failures):
    j = failures["19"]
    assert verdict(j) == ("host", "job:ray_worker_died_at_address+sigkill", "10.0.7.57", 0)
    assert j["confidence"] == 0.5


def decide(rows: list[tuple[int, str, str, int | None]], rule_ids: dict[int, str] | None = None) -> dict:
    """The verdict on job 1 (on n1) whose output events are ``rows``: (line, category, text, rank),
    categories as a rule (or, by ``rule_ids``, the model) might give them."""
    domains = load_ruleset().taxonomy.domains
    ev = pl.DataFrame(
        [
            {
                "event_id": f"out:{n}",
                "source": "out",
                "line_no": n,
                "line_count": 1,
                "provider": "acme",
                "cluster": "c1",
                "job_id": "1",
                "rank": rank,
                "category": cat,
                "domain": domains[cat],
                "severity": "error",
                "action": "none",
                "rule_id": (rule_ids or {}).get(n, f"rule_{n}"),
                "raw": raw,
                "message": raw,
            }
            for n, cat, raw, rank in rows
        ],
        schema=EVENTS,
    )
    row = ROW.format(id="1", nodes="n1", n=1, g=8, day=DAY, end="03:24:30", elapsed="02:24:30")
    jobs = parse_sacct(HEADER + row).jobs.with_columns(provider=pl.lit("acme"), cluster=pl.lit("c1"))
    return attribute_failures(jobs, ev, None, domains).row(0, named=True)


def text(name: str, n: int) -> str:
    return lines(name, n).rstrip("\n")


def test_a_cuda_error_the_watchdog_reraises_takes_the_cuda_errors_category():
    """Were a rule to call the watchdog's termination message a timeout, the CUDA error it
    re-raises (tests/fixtures/jobs/dev/msswift-8371-...) still decides."""
    j = decide([(1, "collective_timeout", text("msswift-8371-device-assert-watchdog-rank11", 1), 11)])
    assert verdict(j) == ("user_app", "job:rule_1+watchdog_reraise", None, 11)
    assert j["action"] == "fix_application"


def test_the_proxys_socket_errors_are_a_peers_death_whatever_a_rule_calls_them():
    """NCCL's proxy failing to receive, or to run an operation with ncclRemoteError (retcode 6),
    reports a peer gone: network by a rule's name, a symptom in the cascade."""
    oom = "nccl-1235-narval-socket-closed-after-cuda-oom"
    j = decide([(4, "network", text(oom, 4), None), (14, "user_app", text(oom, 14), None)])
    assert verdict(j)[:2] == ("user_app", "job:rule_14")
    gone = "nccl-795-aws-remote-error-after-segfault"
    j = decide([(7, "network", text(gone, 7), None)])
    assert verdict(j)[:2] == ("unknown", "job:rule_7+peer_gone")


def test_the_models_guess_does_not_hide_a_peer_gone_line():
    """The heartbeat monitor finding the TCPStore server gone and a rank's recv getting 0 bytes
    (tests/fixtures/jobs/dev/gpustack-6019-...): were the model to call the first a timeout, the
    peer's host still decides; a rule's timeout still counts as one."""
    gs = "gpustack-6019-vllm-zmq-port-collision-tcpstore"
    rows = [(6, "collective_timeout", text(gs, 6), 2), (7, "unknown", text(gs, 7), 4)]
    j = decide(rows, {6: "model:unknown_classifier@x"})
    assert verdict(j) == ("unknown", "job:model:unknown_classifier@x+peer_gone", "glm-node01", None)
    assert verdict(decide(rows))[0] == "collective_timeout"


# models/corpus/dev.jsonl: a Slurm step cancelled (the srun SIGBUS thread of that corpus)
STEP_CANCELLED = "slurmstepd: error: *** STEP 3495450.0 ON orion-01-04 CANCELLED AT 2021-10-27T20:22:22 ***"


def test_a_worker_killed_by_sigkill_with_no_other_word_is_the_host():
    """torchrun's -9 with nothing else said: the OOM killer's signal, so the host, at half
    confidence; a scheduler's notice or a watchdog timeout beside it says otherwise."""
    killed = WORKER_KILLED.rstrip("\n")
    j = decide([(1, "scheduler", killed, None)])
    assert verdict(j)[:2] == ("host", "job:rule_1+sigkill") and j["confidence"] == 0.5
    j = decide([(1, "scheduler", killed, None), (2, "scheduler", STEP_CANCELLED, None)])
    assert verdict(j)[:2] == ("scheduler", "job:rule_1")
    j = decide([(1, "collective_timeout", WATCHDOG.format(r=3).rstrip("\n"), 3), (2, "scheduler", killed, None)])
    assert verdict(j)[0] == "collective_timeout"
    # another signal (SIGABRT: the watchdog's own abort) says nothing of the host
    j = decide([(1, "scheduler", killed.replace("exitcode: -9", "exitcode: -6"), None)])
    assert verdict(j)[0] != "host"


def test_a_worker_aborted_with_no_other_word_is_the_watchdogs_abort():
    """torchrun's -6 (SIGABRT, tests/fixtures/jobs/dev/torchtune-2093-...) with no error of the
    worker's own in the output: the NCCL watchdog's abort, a collective timeout at low
    confidence; the worker's own error, or a scheduler's notice, decides instead."""
    aborted = text("torchtune-2093-save-checkpoint-timeout-glog", 10)
    j = decide([(10, "scheduler", aborted, None)])
    assert verdict(j)[:2] == ("collective_timeout", "job:rule_10+sigabrt") and j["confidence"] == 0.4
    assert j["action"] == "restart_job"
    j = decide([(10, "scheduler", aborted, None), (11, "scheduler", STEP_CANCELLED, None)])
    assert verdict(j)[:2] == ("scheduler", "job:rule_10")
    oom = "nccl-1235-narval-socket-closed-after-cuda-oom"
    j = decide([(10, "scheduler", aborted, None), (14, "user_app", text(oom, 14), None)])
    assert verdict(j)[:2] == ("user_app", "job:rule_14")


def test_cudas_unknown_error_mid_run_with_nothing_else_is_the_gpu():
    """CUDA's "unknown error" re-raised by the watchdog (tests/fixtures/jobs/dev/deepspeed-4648-...,
    and BLOOM's bs-tr11-2022-03-21-... where one GPU died): the GPU at half confidence; a
    specific error of the job's own before it decides instead."""
    unknown = text("deepspeed-4648-2xh100-watchdog-cuda-unknown-error", 1)
    j = decide([(1, "unknown", unknown, 0)])
    assert verdict(j) == ("gpu_hardware", "job:rule_1+cuda_unknown", "n1", 0)
    assert j["confidence"] == 0.5 and j["action"] == "reset_gpu"
    what = text("bs-tr11-2022-03-21-gpu-unknown-error", 2)
    assert verdict(decide([(2, "unknown", what, None)]))[:2] == ("gpu_hardware", "job:rule_2+cuda_unknown")
    oom = "nccl-1235-narval-socket-closed-after-cuda-oom"
    j = decide([(1, "unknown", unknown, 0), (14, "user_app", text(oom, 14), None)])
    assert verdict(j)[:2] == ("user_app", "job:rule_14")
    # another CUDA error re-raised the same way names its own category
    assert verdict(decide([(1, "unknown", unknown.replace("unknown error", "an illegal memory access"), 0)]))[0] != (
        "gpu_hardware"
    )


def test_a_bus_error_alone_is_the_hosts_exhausted_memory():
    """NCCL's threads killed by SIGBUS (tests/fixtures/jobs/dev/megatron-516-...), no other error:
    a mapping past the end of /dev/shm, the host's; beside a timeout it decides nothing."""
    sigbus = text("megatron-516-nccl-bus-error-sigbus", 2)
    j = decide([(1, "unknown", sigbus, None)])
    assert verdict(j)[:2] == ("host", "job:rule_1+exhaustion")
    j = decide([(1, "unknown", sigbus, None), (2, "collective_timeout", WATCHDOG.format(r=3).rstrip("\n"), 3)])
    assert verdict(j)[0] == "collective_timeout"


def test_launchers_and_ucx_name_the_rank_and_node_that_died():
    """Open MPI's launcher, UCX's signal handler (models/corpus/dev.jsonl: NVIDIA/nccl#1419) and
    Ray (tests/fixtures/jobs/dev/ray-*) name the rank or node where the process died."""
    rs = load_ruleset()
    mpirun = "prterun noticed that process rank 48 with PID 613162 on node gpu-node07 exited on signal 11 (Segmentation fault)."
    ucx = "[gpu-node09:332629:0:332629] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)"
    died = text("ray-47461-release-test-4gpu-worker-died-oom", 1).removeprefix("(raylet) ")
    lost = text("ray-22349-train-node-terminated-heartbeats", 6).split("\t", 1)[1]
    got = classify_messages(pl.Series([mpirun, ucx, died, lost, "Worker 0 has failed."]), rs)
    assert got.select("rule_id", "category", "node", "rank").rows() == [
        ("mpirun_process_exited_on_signal", "scheduler", "gpu-node07", 48),
        ("ucx_caught_signal", "unknown", "gpu-node09", None),
        ("ray_worker_died_at_address", "scheduler", "10.0.7.57", None),
        ("ray_node_marked_dead", "scheduler", "10.128.0.103", None),
        ("ray_train_worker_failed", "scheduler", None, 0),
    ]


# models/corpus/dev.jsonl: NVSentinel's Xid 31 design note (a process's MMU fault) and
# tests/fixtures/jobs/dev/nccl-1235-... (the CUDA out-of-memory on localRank 3)
XID31 = "NVRM: Xid (PCI:0000:b5:00): 31, pid=2079991, name=pt_main_thread, Ch 00000007, intr 00000000. "
OOM = "nccl-1235-narval-socket-closed-after-cuda-oom"


def timed(rows: list[tuple[str | None, str, str, str, str, str]], end: str = "03:24:30") -> dict:
    """The verdict on job 1 (n1, from 01:00:00 to ``end``) from ``rows``: (job id or None for
    n1's kernel log, HH:MM:SS, ts_source, category, rule, text)."""
    domains = load_ruleset().taxonomy.domains
    ev = pl.DataFrame(
        [
            {
                "event_id": f"e{i}",
                "source": "out" if job else "kernel/n1.log",
                "line_no": i,
                "line_count": 1,
                "ts": dt.datetime.fromisoformat(f"{DAY}T{hms}+00:00"),
                "ts_source": how,
                "provider": "acme",
                "cluster": "c1",
                "node": None if job else "n1",
                "job_id": job,
                "category": cat,
                "domain": domains[cat],
                "severity": "error",
                "action": "none",
                "rule_id": rule,
                "raw": raw,
                "message": raw,
            }
            for i, (job, hms, how, cat, rule, raw) in enumerate(rows, start=1)
        ],
        schema=EVENTS,
    )
    row = ROW.format(id="1", nodes="n1", n=1, g=8, day=DAY, end=end, elapsed="00:00:00")
    jobs = parse_sacct(HEADER + row).jobs.with_columns(provider=pl.lit("acme"), cluster=pl.lit("c1"))
    return attribute_failures(jobs, ev, None, domains).row(0, named=True)


def test_a_line_without_its_own_stamp_happened_by_the_next_one():
    """A user error that only inherits the stamp of the job's first lines (progress lines print
    none) may come after the node's fault: the fault decides; stamped two hours before it, not."""
    oom, xid = text(OOM, 14), XID79.split("kernel: ", 1)[1].rstrip("\n")
    fault = (None, "03:10:00", "yearless", "gpu_bus_lost", "nvrm_xid", xid)
    j = timed([("1", "01:00:05", "inherited", "user_app", "cuda_out_of_memory", oom), fault])
    assert verdict(j)[:3] == ("gpu_bus_lost", "node:nvrm_xid", "n1")
    j = timed([("1", "01:00:05", "absolute", "user_app", "cuda_out_of_memory", oom), fault])
    assert verdict(j)[:2] == ("user_app", "job:cuda_out_of_memory")


def test_a_process_fault_before_the_job_started_was_another_jobs():
    """An Xid 31 (a process's MMU fault) 30 s before a short job started belongs to the job
    before; the GPU fault in the same node's log during the job decides."""
    xid79 = XID79.split("kernel: ", 1)[1].rstrip("\n")
    before = (None, "00:59:30", "yearless", "user_app", "nvrm_xid", XID31)
    j = timed([before, (None, "01:04:00", "yearless", "gpu_bus_lost", "nvrm_xid", xid79)], end="01:05:00")
    assert verdict(j)[:3] == ("gpu_bus_lost", "node:nvrm_xid", "n1")
    j = timed([before], end="01:05:00")
    assert verdict(j)[:2] == ("unknown", "state:FAILED")
    j = timed([(None, "01:00:30", "yearless", "user_app", "nvrm_xid", XID31)], end="01:05:00")
    assert verdict(j)[:2] == ("user_app", "node:nvrm_xid")


def test_the_launchers_teardown_of_the_other_workers_is_not_what_ended_the_job():
    """torchrun sends SIGTERM to the other workers after one failed
    (tests/fixtures/jobs/dev/torchtune-2093-...): the worker's failure it reacts to decides,
    and the teardown is no scheduler's notice that would rule out a SIGKILL's reading."""
    tt = "torchtune-2093-save-checkpoint-timeout-glog"
    j = decide([(3, "scheduler", text(tt, 3), None), (10, "scheduler", text(tt, 10), None)])
    assert verdict(j)[:2] == ("collective_timeout", "job:rule_10+sigabrt")
    j = decide([(3, "scheduler", text(tt, 3), None), (4, "scheduler", WORKER_KILLED.rstrip("\n"), None)])
    assert verdict(j)[:2] == ("host", "job:rule_4+sigkill")


def test_srun_reporting_a_tasks_own_death_is_not_the_schedulers_act():
    """srun's "task 5: Exited with exit code 1" (tests/fixtures/jobs/dev/deit-102-...) reports the
    program's death: the step's termination, the step's cancellation and the tasks srun kills
    after it are its teardown, so the verdict is unknown (placed where the line says); a cancellation
    printed before any task died is still the scheduler's act."""
    deit = "deit-102-srun-task5-exit1-others-killed"
    rows = [(n, "scheduler", text(deit, n), None) for n in (1, 2, 3, 4)]
    j = decide(rows)
    assert verdict(j)[:2] == ("unknown", "job:rule_1") and j["confidence"] == 0.3
    j = decide([(1, "scheduler", STEP_CANCELLED, None), *[(n + 1, c, t, r) for n, c, t, r in rows]])
    assert verdict(j)[:2] == ("scheduler", "job:rule_1")
