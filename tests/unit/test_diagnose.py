"""``faultline diagnose`` on real failed jobs' output (tests/fixtures/jobs/dev/): the verdict, its
three formats, stdin and compression, kernel logs and sacct, and bad input (one line, exit 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from helpers.hostile import ANSI, BIDI, SCRIPT

from faultline.classify import corpus
from faultline.cli import main

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs" / "dev"
KOHYA = CASES / "kohya-1434-ecc-2xh100-watchdog" / "output.log"
# real-format lines as the rest of the suite uses them (tests/unit/test_analytics.py)
XID79 = (
    "Nov 24 03:14:07 n9 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=20412, name=python3, GPU has fallen off the bus.\n"
)
SACCT = (
    "JobID|JobName|User|Partition|NodeList|NNodes|AllocTRES|Submit|Start|End|Elapsed|State|ExitCode|Reason\n"
    "4242|train|alice|gpu|n[8-9]|2|cpu=16,gres/gpu=16,node=2|2026-11-24T01:00:00|2026-11-24T01:00:00|"
    "2026-11-24T03:15:00|02:15:00|FAILED|1:0|None\n"
)


def run(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(main, ["diagnose", *args], input=stdin, catch_exceptions=False)


def as_json(*args: str, stdin: bytes | None = None) -> dict:
    res = run(*args, "--format", "json", stdin=stdin)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_text_names_the_verdict_the_deciding_line_and_what_to_do():
    res = run(str(KOHYA))
    assert res.exit_code == 0
    out = res.stdout
    assert "verdict     gpu_memory (hardware), confidence 0.85" in out
    assert "culprit     rank 1" in out
    assert f"evidence    {KOHYA}:3  [gpu_memory]  RuntimeError: CUDA error: uncorrectable ECC error encountered" in out
    assert "symptoms    1 other error line(s)" in out
    assert "reset the GPU" in out and "decided by  job:cuda_ecc_uncorrectable" in out


def test_json_is_one_object_with_the_verdict_and_its_evidence():
    d = as_json(str(CASES / "nccl-1235-narval-socket-closed-after-cuda-oom" / "output.log"))
    keys = "root_cause domain culprit_node culprit_rank culprit_gpu confidence action decided_by evidence symptoms"
    assert set(keys.split()) <= set(d)
    assert (d["root_cause"], d["culprit_node"], d["culprit_rank"], d["action"]) == (
        "user_app",
        "ng30903",
        None,
        "fix_application",
    )
    [e] = d["evidence"]
    assert (e["line_no"], e["category"]) == (14, "user_app")
    assert e["text"] == "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"
    assert d["symptoms"] == 3 and d["job"]["job_id"] == "job"


@pytest.mark.parametrize("pack", [lambda b: b, gzip.compress, zstandard.ZstdCompressor().compress])
def test_stdin_plain_gzip_and_zstd(pack):
    d = as_json("-", stdin=pack(KOHYA.read_bytes()))
    assert (d["root_cause"], d["culprit_rank"], d["evidence"][0]["source"]) == ("gpu_memory", 1, "-")


def test_an_old_logs_year_less_stamps_take_the_year_of_its_dated_ones():
    # torchtitan#810: a 2025 logging stamp on a benign line, the error in glog's year-less form
    log = CASES / "torchtitan-810-b200-illegal-address-doubled-prefix" / "output.log"
    for args in ([str(log)], ["-"]):
        d = as_json(*args, stdin=log.read_bytes() if args == ["-"] else None)
        assert (d["job"]["started"], d["job"]["ended"]) == ("2025-01-28T13:23:00Z", "2025-01-28T13:23:00Z")


def test_compressed_files_and_slurm_names(tmp_path):
    gz = tmp_path / "slurm-77_3.out.gz"
    gz.write_bytes(gzip.compress(KOHYA.read_bytes()))
    d = as_json(str(gz))
    assert (d["root_cause"], d["job"]["job_id"]) == ("gpu_memory", "77_3")


def test_a_kernel_fault_on_the_node_beats_the_cuda_error_it_caused(tmp_path):
    kernel = tmp_path / "dmesg.txt"
    kernel.write_text(XID79)
    d = as_json(str(KOHYA), "--kernel", str(kernel), "--node", "n9")
    assert (d["root_cause"], d["culprit_node"], d["culprit_gpu"], d["decided_by"]) == (
        "gpu_bus_lost",
        "n9",
        "0000:3b:00",
        "node:nvrm_xid",
    )
    assert d["evidence"][0] == {
        "source": str(kernel),
        "line_no": 1,
        "text": XID79.rstrip("\n"),
        "category": "gpu_bus_lost",
    }
    assert any("scontrol update nodename=n9 state=drain" in s for s in d["next_steps"])


def test_sacct_gives_the_job_its_nodes_and_end(tmp_path):
    (tmp_path / "sacct.txt").write_text(SACCT)
    (tmp_path / "n9.log").write_text(XID79)
    d = as_json(str(KOHYA), "--kernel", str(tmp_path / "n9.log"), "--sacct", str(tmp_path / "sacct.txt"))
    assert (d["job"]["job_id"], d["job"]["nodes"], d["job"]["ended"]) == ("4242", ["n8", "n9"], "2026-11-24T03:15:00Z")
    assert (d["root_cause"], d["culprit_node"]) == ("gpu_bus_lost", "n9")
    # the ECC error names rank 1: on n8, the first node of the allocation, when nothing else speaks
    assert as_json(str(KOHYA), "--sacct", str(tmp_path / "sacct.txt"))["culprit_node"] == "n8"
    (tmp_path / "n7.log").write_text(XID79)
    d = as_json(str(KOHYA), "--kernel", str(tmp_path / "n7.log"), "--sacct", str(tmp_path / "sacct.txt"))
    assert d["root_cause"] == "gpu_memory" and "node n7 is not one of the job's nodes" in d["notes"][0]


def test_a_kernel_log_named_for_no_node_belongs_to_the_host_its_lines_name(tmp_path):
    (tmp_path / "sacct.txt").write_text(SACCT)
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text(XID79)
    d = as_json(str(KOHYA), "--kernel", str(dmesg), "--sacct", str(tmp_path / "sacct.txt"))
    assert (d["root_cause"], d["culprit_node"], d["notes"]) == ("gpu_bus_lost", "n9", [])
    assert any("scontrol update nodename=n9 state=drain" in s for s in d["next_steps"])
    # a host outside the allocation: its lines are not used
    dmesg.write_text(XID79.replace(" n9 ", " n7 "))
    d = as_json(str(KOHYA), "--kernel", str(dmesg), "--sacct", str(tmp_path / "sacct.txt"))
    assert d["root_cause"] == "gpu_memory" and "node n7 is not one of the job's nodes" in d["notes"][0]
    # raw dmesg names no host: the file's stem stands in, and the note asks for --node
    kern = tmp_path / "kern.log"
    kern.write_text("[ 8812.334455] " + XID79.split("kernel: ", 1)[1])
    d = as_json(str(KOHYA), "--kernel", str(kern))
    assert d["root_cause"] == "gpu_bus_lost"
    assert "neither its name nor its lines name a node: taken as node kern (give --node)" in d["notes"][0]


def test_on_one_node_the_local_rank_of_the_killed_worker_is_its_rank(tmp_path):
    log = CASES / "axolotl-1268-accelerate-8gpu-local-rank7-sigkill" / "output.log"
    d = as_json(str(log))
    assert (d["root_cause"], d["culprit_rank"]) == ("host", 7)
    # two nodes in the allocation: local rank 7 may be rank 15, so no rank is named
    (tmp_path / "sacct.txt").write_text(SACCT)
    d = as_json(str(log), "--sacct", str(tmp_path / "sacct.txt"))
    assert (d["root_cause"], d["culprit_rank"]) == ("host", None)


def test_a_local_rank_label_behind_another_prefix_is_the_one_node_rank(tmp_path):
    # torchx's replica label "trainer/0 [3]:" (pytorch#137523) before a real CUDA OOM (trl#3436)
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB. GPU 0 has a total capacity "
        "of 9.68 GiB of which 95.75 MiB is free."
    )
    log = tmp_path / "slurm-7.out"
    log.write_text(f"trainer/0 [0]:step 10 loss 1.25\ntrainer/0 [3]:{oom}\n")
    d = as_json(str(log))
    assert (d["root_cause"], d["culprit_rank"]) == ("user_app", 3)


def test_raw_dmesg_counts_as_of_the_jobs_end_unless_boot_places_it(tmp_path):
    dmesg = tmp_path / "n9.log"
    dmesg.write_text("[ 8812.334455] " + XID79.split("kernel: ", 1)[1])
    d = as_json(str(KOHYA), "--kernel", str(dmesg), "--node", "n9")
    assert (d["root_cause"], d["culprit_node"]) == ("gpu_bus_lost", "n9")
    assert "1 kernel line(s) without a time were taken as of the job's end" in d["notes"][0]
    (tmp_path / "sacct.txt").write_text(SACCT)
    placed = ("--kernel", str(dmesg), "--sacct", str(tmp_path / "sacct.txt"))
    # booted 02:28:15: the Xid at 04:55:07 is after the job's end (03:15), not its cause
    d = as_json(str(KOHYA), *placed, "--boot", "2026-11-24T02:28:15Z")
    assert d["root_cause"] == "gpu_memory" and not d["notes"]
    # booted 00:48:15: the Xid at 03:15:07 is in the job's window
    d = as_json(str(KOHYA), *placed, "--boot", "2026-11-24T00:48:15Z")
    assert (d["root_cause"], d["culprit_node"]) == ("gpu_bus_lost", "n9")


def test_a_deciding_line_without_a_rank_takes_the_worker_torchrun_reported_failed():
    # "pure virtual method called", then torchrun: "failed (exitcode: -6) local_rank: 0"
    d = as_json(str(CASES / "megatron-1874-pure-virtual-abort-at-exit" / "output.log"))
    assert (d["root_cause"], d["decided_by"], d["culprit_rank"]) == ("user_app", "job:cpp_pure_virtual_call", 0)


def test_pythons_abort_after_a_watchdog_timeout_is_the_timeouts_symptom():
    d = as_json(str(CASES / "pytorchdiscuss-187207-fsdp-2xa100-allgather-timeout" / "output.log"))
    assert (d["root_cause"], d["decided_by"]) == ("collective_timeout", "pt_watchdog_collective_timeout")


def test_a_worker_killed_by_sigbus_is_the_hosts_shared_memory():
    d = as_json(str(CASES / "accelerate-1254-docker-test-rank1-exitcode-7" / "output.log"))
    assert (d["root_cause"], d["culprit_node"], d["culprit_rank"]) == ("host", "cnsz22plaoy9", 1)


def test_rays_memory_monitor_names_the_node_that_ran_out():
    d = as_json(str(CASES / "verl-2950-dapo-ray-oom-rollout-workers" / "output.log"))
    assert (d["root_cause"], d["culprit_node"]) == ("host", "10.20.49.141")
    d = as_json(str(CASES / "easyr1-185-raylet-memory-pressure-oom" / "output.log"))
    assert (d["root_cause"], d["culprit_node"]) == ("host", "10.95.143.76")


def test_horovods_stall_inspector_names_the_rank_the_others_wait_for():
    # "allreduce.avg_loss [missing ranks: 1]" under the stall warning (horovod/horovod#429)
    d = as_json(str(CASES / "horovod-429-stalled-allreduce-missing-rank1" / "output.log"))
    assert (d["root_cause"], d["culprit_rank"]) == ("collective_timeout", 1)


def test_gloos_monitored_barrier_names_the_rank_it_waits_on_not_the_rank_that_waits():
    # "[rank3]:... Rank 3 successfully reached monitoredBarrier, but received errors while waiting
    # for send/recv from rank 0" (sgl-project/sglang#5602)
    d = as_json(str(CASES / "sglang-5602-monitoredbarrier-rank0-faulty" / "output.log"))
    assert (d["culprit_rank"], d["decided_by"]) == (0, "gloo_monitored_barrier_peer+named_rank")


def test_nccls_shm_failure_under_last_error_decides_the_system_error_above_it():
    # "ncclSystemError ... Last error: Error while creating shared memory segment /dev/shm/..."
    d = as_json(str(CASES / "dle-1386-deepspeed-pipeline-nccl-shm-segment-fail" / "output.log"))
    assert (d["root_cause"], d["decided_by"]) == ("host", "job:nccl_shm_segment_failed")


def test_deepspeeds_launcher_killing_a_worker_that_got_sigkill_is_the_hosts_oom_killer():
    # "Killing subprocess 13266", then "... exits with return code = -9" (DeepSpeed#3232)
    src = "https://github.com/deepspeedai/DeepSpeed/issues/3232"
    text = "".join(r["text"] + "\n" for r in corpus.load("dev") if r["source"] == src)
    d = as_json("-", stdin=text.encode())
    assert (d["root_cause"], d["decided_by"]) == ("host", "job:launcher_worker_died+sigkill")


def test_unreadable_input_is_one_line_and_exit_2(tmp_path):
    for args, msg in (
        ([str(tmp_path / "nope.log")], "no such file"),
        ([str(tmp_path)], "is a directory"),
        ([str(KOHYA), "--sacct", str(tmp_path / "none.txt")], "no such file"),
    ):
        res = run(*args)
        assert res.exit_code == 2 and res.stdout == ""
        assert res.stderr.count("\n") == 1 and msg in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "empty.txt").write_text("")
    res = run(str(KOHYA), "--sacct", str(tmp_path / "empty.txt"))
    assert res.exit_code == 2 and "no job rows" in res.stderr


def test_input_with_no_readable_line_is_one_clear_error(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "binary.log").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "huge.log").write_bytes(b"x" * (10 << 20) + b"\n")
    for name, msg in [
        ("empty.log", "empty.log: empty: no line to diagnose"),
        ("binary.log", "binary.log: no readable line to diagnose (65 line(s), all binary"),
        ("huge.log", "huge.log: no readable line to diagnose (1 line(s), all binary"),
    ]:
        res = run(str(tmp_path / name))
        assert res.exit_code == 2 and res.stdout == "", name
        assert res.stderr.count("\n") == 1 and msg in res.stderr and "Traceback" not in res.stderr
    # one readable input is enough: the others are named in the notes
    d = as_json(str(tmp_path / "binary.log"), str(KOHYA))
    assert d["root_cause"] == "gpu_memory" and any("binary.log: 65 line(s) could not be read" in n for n in d["notes"])


def test_odd_input_still_gets_a_verdict(tmp_path):
    (tmp_path / "long.log").write_bytes(b"x" * (10 << 20) + b"\n" + KOHYA.read_bytes())
    d = as_json(str(tmp_path / "long.log"))
    assert d["root_cause"] == "gpu_memory" and d["evidence"][0]["line_no"] == 4
    assert any("1 line(s) could not be read" in n for n in d["notes"])


def test_log_text_cannot_reach_the_terminal_or_the_ticket_as_markup(tmp_path):
    log = tmp_path / "out.log"
    log.write_text(f"RuntimeError: CUDA error: uncorrectable ECC error encountered {SCRIPT}{ANSI}red{BIDI}\n")
    text = run(str(log)).stdout
    assert ANSI not in text and BIDI not in text and "[U+202E]" in text
    md = run(str(log), "--format", "md").stdout
    assert SCRIPT not in md and "&lt;script&gt;" in md and ANSI not in md
