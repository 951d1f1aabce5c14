"""The job-output rules (nccl, pytorch, cuda, slurm) on real lines from the corpus and the job
fixtures: each line alone gets the rule and category stated, and real excerpts join as the
engine says (an NCCL unwind chain, CUDA's advice, a cancellation's teardown, a traceback tail,
the ChildFailedError table), benign output around one matching line staying benign."""

import datetime as dt
import io

import pytest

from faultline.ingest.parse import SourceContext, parse_stream

LINES = [
    # (real line, rule that decides it alone, category)
    (
        "  Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)",
        "nccl_shm_segment_failed",
        "host",
    ),
    (
        "[2025-04-06 22:31:56] ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
        "nccl_nvls_cuda_failure",
        "nvlink",
    ),
    (
        "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        "nccl_cuda_failure_app",
        "user_app",
    ),
    (
        "DESKTOP-1CE5APL:1689:2800 [0] include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'",
        "nccl_cuda_failure",
        "unknown",
    ),
    (
        "ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
        "nccl_cuda_alloc_failed",
        "user_app",
    ),
    (
        "ubuntu:9621:9621 [0] misc/cudawrap.cc:179 NCCL WARN Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='') : ",
        "nccl_cuda_library_lookup",
        "benign",
    ),
    (
        "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)",
        "nccl_net_ib_completion_error",
        "network",
    ),
    (
        "ms-pd-llm-d-modelservice-prefill-2.log:[2025-09-17 15:16:23] ms-pd-llm-d-modelservice-prefill-2:311:405 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_32:1 Got async error event: port error",
        "nccl_net_ib",
        "network",
    ),
    (
        "dgxh100-3:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable",
        "nccl_ibv_call_failed",
        "network",
    ),
    (
        "[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
        "nccl_net_ofi",
        "network",
    ),
    (
        "WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
        "ofi_plugin_warn",
        "network",
    ),
    (
        "a100-st-p4d24xlarge-22:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer a100-st-p4d24xlarge-22.luciodelelis-92732890-0458-4f76-8369-c4fee80b23e7.pcluster<47861>",
        "nccl_connection_closed",
        "network",
    ),
    (
        "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
        "nccl_socket_error",
        "network",
    ),
    (
        "a100-st-p4d24xlarge-22:183006:183220 [1] proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from rank 9, retcode 6",
        "nccl_proxy_remote_error",
        "network",
    ),
    (
        "ucpe-resource033018034100:6897:7102 [2] misc/nvmlwrap.cc:187 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found",
        "nccl_nvml_gpu_not_visible",
        "user_app",
    ),
    (
        "A03-R28-I49-2-6000166: Test NCCL failure common.cu:497 'unhandled cuda error'",
        "nccl_unhandled_cuda_error",
        "unknown",
    ),
    (
        "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1616554793803/work/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
        "nccl_system_error",
        "network",
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3",
        "nccl_internal_error",
        "unknown",
    ),
    (" .. A03-R28-I49-2-6000166 pid 104934: Test failure common.cu:587", "nccl_tests_failure_trail", "benign"),
    ("a100-st-p4d24xlarge-22:183006:183220 [1] NCCL INFO misc/socket.cc:535 -> 6", "nccl_unwind", "benign"),
    (
        "kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
        "nccl_service_thread_closed",
        "benign",
    ),
    ("NET/Plugin: Failed to find ncclNetPlugin_v9 symbol.", "nccl_net_plugin_lookup", "benign"),
    (
        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'. ",
        "nccl_nvls_bind_failed",
        "nvlink",
    ),
    ("gpu: Test CUDA failure common.cu:1030 'system not yet initialized'", "nccltests_cuda_not_ready", "nvlink"),
    (
        "[rank5]:[E901 05:20:03.110823792 ProcessGroupNCCL.cpp:1685] [PG ID 0 PG GUID 0(default_pg) Rank 5] Observed flight recorder dump signal from another rank via TCPStore.",
        "pt_flight_recorder_dump_signal",
        "collective_timeout",
    ),
    (
        "[80748] [rank0]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.",
        "pt_watchdog_ops_failed",
        "collective_timeout",
    ),
    (
        "[rank0]:[E804 23:05:54.818690144 ProcessGroupNCCL.cpp:1628] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1, only active collectives: 0",
        "pt_watchdog_detail",
        "benign",
    ),
    (
        "[rank2]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
        "pt_gloo_timeout",
        "collective_timeout",
    ),
    (
        "I1107 01:20:28.501000 7974 torch/distributed/elastic/multiprocessing/errors/__init__.py:368] ('local_rank %s FAILED with no error file. Decorate your entrypoint fn with @record for traceback info. See: https://pytorch.org/docs/stable/elastic/errors.html', 0)",
        "torchrun_agent_teardown",
        "scheduler",
    ),
    ("Killing subprocess 74367", "launcher_killing_subprocess", "scheduler"),
    ("  exitcode  : 1 (pid: 3669031)", "torchrun_table_exitcode", "scheduler"),
    ("  time      : 2023-09-04_10:10:23", "torchrun_table_row", "benign"),
    ("=====================================================", "torchrun_table_frame", "benign"),
    ("torch.multiprocessing.spawn.ProcessRaisedException:", "launcher_worker_died", "scheduler"),
    (
        "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-DL8UIP5]:29500 (system error: 10049 - The requested address is not valid in its context.).",
        "pt_c10d_connect_failed",
        "network",
    ),
    (
        "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:12211 (errno: 98 - Address already in use).",
        "pt_c10d_port_in_use",
        "user_app",
    ),
    (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "pt_dataloader_bus_error",
        "host",
    ),
    (
        "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/176: file write failed",
        "pt_checkpoint_write_failed",
        "storage",
    ),
    (
        "[rank0]:[W1111 11:55:57.148815586 Utils.hpp:112] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())",
        "pt_env_var_deprecated",
        "benign",
    ),
    (
        "2023-03-20 20:38:19,874] [WARNING] [stage3.py:1939:step] 13 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding torch.cuda.empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time",
        "pt_benign_notice",
        "benign",
    ),
    (
        "RuntimeError: cuda runtime error (802) : system not yet initialized at /opt/conda/conda-bld/pytorch_1579022034529/work/aten/src/THC/THCGeneral.cpp:50",
        "cuda_system_not_ready",
        "nvlink",
    ),
    (
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.",
        "cuda_driver_mismatch",
        "driver_firmware",
    ),
    (
        "[task 2025-07-01T05:06:30.005+00:00] [train] [nvidia-smi(stdout)] NVML library version: 550.144",
        "nvml_library_version",
        "benign",
    ),
    (
        "Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost.  Reboot",
        "nvidia_smi_gpu_lost",
        "gpu_bus_lost",
    ),
    ("CUDA Error: no CUDA-capable device is detected", "cuda_no_gpus_available", "gpu_bus_lost"),
    (
        "[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
        "cuda_illegal_address",
        "user_app",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
        "cuda_library_execution_failed",
        "user_app",
    ),
    (
        "(RayWorkerVllm pid=5304) [E ProcessGroupNCCL.cpp:916] [Rank 7] NCCL watchdog thread terminated with exception: CUDA error: unknown error",
        "cuda_error_other",
        "unknown",
    ),
    (
        "[E ProcessGroupNCCL.cpp:915] [Rank 1] NCCL watchdog thread terminated with ",
        "pt_watchdog_terminated",
        "collective_timeout",
    ),
    (
        "/home/ub2004/anaconda3/envs/yk_py39/lib/python3.9/site-packages/deepspeed/runtime/pipe/engine.py:1137: UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations. (Triggered internally at aten/src/ATen/core/TensorBody.h:480.)",
        "python_warning",
        "benign",
    ),
    (
        "slurmstepd: error: *** JOB 3884617 ON node023 CANCELLED AT 2018-08-19T16:30:21 DUE TO TIME LIMIT ***",
        "slurmstepd_cancelled_time_limit",
        "scheduler",
    ),
    (
        "slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***",
        "slurmstepd_cancelled_time_limit_old",
        "scheduler",
    ),
    (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been OOM Killed. srun: error: sdumont6156: task 0: Out Of Memory",
        "slurmstepd_oom_kill",
        "user_app",
    ),
    ("srun: error: nid001277: tasks 1-3: Out Of Memory", "srun_tasks_out_of_memory", "user_app"),
    ("srun: error: gpu20-15: task 0: Out Of Memory", "srun_task_out_of_memory", "user_app"),
    (
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "nccltests_table_header",
        "benign",
    ),
    ("salloc: error: Node failure on worker-1", "srun_node_failure", "scheduler"),
    ("srun: Force Terminated job 32233190", "srun_step_terminating", "scheduler"),
    (
        "submitit WARNING (2022-08-12 02:06:11,453) - Caught signal SIGUSR2 on SERVER_NAME: this job is preempted.",
        "submitit_preempted",
        "scheduler",
    ),
    (
        "srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)",
        "slurm_command_error",
        "scheduler",
    ),
]


def _parse(lines: list[str]):
    ctx = SourceContext(source="job.log", kind="job", ref_date=dt.date(2025, 1, 1), full=True)
    return parse_stream(io.BytesIO(("\n".join(lines) + "\n").encode()), ctx)


@pytest.mark.parametrize("line,rule_id,category", LINES, ids=[f"{c[1]}:{c[0][:30]}" for c in LINES])
def test_rule_on_a_real_line(line, rule_id, category):
    row = _parse([line]).per_line.row(0, named=True)
    assert (row["rule_id"], row["category"]) == (rule_id, category)


def _verdicts(lines: list[str]) -> list[tuple[str, str | None]]:
    return _parse(lines).per_line.sort("line_no").select("category", "rule_id").rows()


def test_an_nccl_unwind_chain_carries_its_warning():
    lines = [
        "ng30903:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer ng30903-ib.narval.calcul.quebec<51159>",
        "ng30903:3063025:3066048 [0] NCCL INFO misc/socket.cc:749 -> 6",
        "ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80",
        "ng30903:3063025:3066048 [0] NCCL INFO transport/p2p.cc:438 -> 3",
        "ng30903:3063025:3066048 [0] NCCL INFO transport.cc:33 -> 3",
        "ng30903:3063025:3066048 [0] NCCL INFO group.cc:65 -> 3 [Async thread]",
    ]
    res = _parse(lines)
    assert res.events.select("line_no", "line_count", "category", "node").rows() == [
        (1, 2, "network", "ng30903"),
        (3, 4, "network", "ng30903"),
    ]
    assert [c for c, _ in _verdicts(lines)] == ["network"] * 6


def test_indented_output_around_one_matching_line_stays_benign():
    # nvidia-smi -q in a job log: only the active throttle reason is an event
    lines = [
        "    Clocks Event Reasons",
        "        Idle                              : Not Active",
        "        Applications Clocks Setting       : Not Active",
        "        SW Power Cap                      : Active",
        "        HW Slowdown                       : Not Active",
        "            HW Thermal Slowdown           : Not Active",
    ]
    cats = [c for c, _ in _verdicts(lines)]
    assert cats == ["benign", "benign", "benign", "thermal_power", "benign", "benign"]


def test_a_timeout_keeps_its_category_above_the_desync_report_it_opens():
    lines = [
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=8000) ran for 8097 milliseconds before timing out.",
        " - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "     [1] finished collective #2, but didn't join collective #3 (count from 1)",
    ]
    assert _verdicts(lines) == [
        ("collective_timeout", "pt_watchdog_collective_timeout"),
        ("user_app", None),
        ("user_app", "pt_desync_not_joined"),
    ]
    assert _parse(lines).events.select("line_count", "category").rows() == [(3, "user_app")]


def test_cuda_advice_joins_the_cuda_error():
    lines = [
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    assert [c for c, _ in _verdicts(lines)] == ["gpu_memory"] * 4


def test_the_launcher_teardown_joins_the_cancellation():
    lines = [
        "srun: Job step aborted: Waiting up to 62 seconds for job step to finish.",
        "slurmstepd: error: *** STEP 1809577.0 ON r6i5n1 CANCELLED AT 2021-05-23T08:46:02 ***",
        "Killing subprocess 74367",
        "Killing subprocess 74368",
    ]
    assert [c for c, _ in _verdicts(lines)] == ["scheduler"] * 4
    assert _parse(lines).events.select("line_no", "line_count").rows() == [(1, 1), (2, 3)]


def test_a_traceback_tail_printed_first_joins_the_event_below():
    lines = [
        "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f3b6e7236fc in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
        "frame #4: <unknown function> + 0xd6df4 (0x7f3bca9d5df4 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6)",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
    ]
    assert [c for c, _ in _verdicts(lines)] == ["collective_timeout"] * 4
    assert _parse(lines).events.select("line_no", "line_count", "rank").rows() == [(1, 4, 5)]


def test_the_childfailederror_table_is_the_schedulers():
    lines = [
        "  host      : vmnuvocinpoc.internal.cloudapp.net",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : 1 (pid: 69812)",
        "  error_file: <N/A>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-03-05_07:01:51",
    ]
    assert [c for c, _ in _verdicts(lines)] == ["scheduler"] * 8


def test_srun_names_the_node_and_the_rank_of_a_single_dead_task():
    """A single srun task id is the task's global rank; a range names no one rank
    (tests/fixtures/jobs/dev/deit-102-...)."""
    lines = [
        "srun: error: learnfair0824: task 5: Exited with exit code 1",
        "srun: error: learnfair0824: tasks 3,7: Killed",
        "srun: error: learnfair0833: task 8: Killed",
    ]
    assert _parse(lines).per_line.sort("line_no").select("rule_id", "node", "rank").rows() == [
        ("srun_task_exit", "learnfair0824", 5),
        ("srun_tasks_exit", "learnfair0824", None),
        ("srun_task_exit", "learnfair0833", 8),
    ]
