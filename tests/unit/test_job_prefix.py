"""Job-output launcher labels and loggers (prefix.JOB_LABELS, PREFIX_RE): on real lines from the
corpus and the job fixtures, the node, rank, local rank, time and message each line gives."""

import datetime as dt
import io

import pytest

from faultline.ingest.lines import per_line_records
from faultline.ingest.parse import SourceContext, parse_stream

DAY = dt.date(2025, 1, 1)  # year-less stamps (glog, vLLM) take their year from it

CASES = [
    # (line, node, rank, local_rank, ts (UTC, ISO) or None, ts_source, message)
    # torchrun rank
    (
        "[rank3]:[E1206 18:44:13.275158817 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.",
        None,
        3,
        None,
        "2024-12-06T18:44:13.275158",
        "yearless",
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.",
    ),
    # doubled rank
    (
        "[rank0]:[rank0]:[E128 13:23:00.788972321 ProcessGroupNCCL.cpp:1897] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
        None,
        0,
        None,
        "2025-01-28T13:23:00.788972",
        "yearless",
        "[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
    ),
    # tee local rank then rank
    (
        "[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 12] Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered",
        None,
        12,
        0,
        "2025-08-17T17:40:34.227531",
        "yearless",
        "[PG 0 (default_pg) Rank 12] Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered",
    ),
    # Lightning's rank label (declare-lab/flan-alpaca#17)
    ("[rank: 3] Global seed set to 42", None, 3, None, None, "none", "Global seed set to 42"),
    # tee local rank alone
    (
        "[default3]:  what():  CUDA error: unknown error",
        None,
        None,
        3,
        None,
        "none",
        "  what():  CUDA error: unknown error",
    ),
    # srun -l task id
    ("0: worker-2", None, 0, None, None, "none", "worker-2"),
    # srun -l before NeMo's logger
    (
        "0: [NeMo W 2023-01-18 07:39:29 experimental:27] Module <class 'nemo.collections.nlp.data.language_modeling.megatron.megatron_batch_samplers.MegatronPretrainingRandomBatchSampler'> is experimental, not ready for production and is not fully supported. Use at your own risk.",
        None,
        0,
        None,
        "2023-01-18T07:39:29.000000",
        "naive_utc",
        "Module <class 'nemo.collections.nlp.data.language_modeling.megatron.megatron_batch_samplers.MegatronPretrainingRandomBatchSampler'> is experimental, not ready for production and is not fully supported. Use at your own risk.",
    ),
    # pdsh host before a rank label
    (
        'worker-5: [rank22]:   File "/nvfile-data/thu/hehaowei/codellama-main/fms_hhw/main_new.py", line 307, in <module>',
        "worker-5",
        22,
        None,
        None,
        "none",
        '  File "/nvfile-data/thu/hehaowei/codellama-main/fms_hhw/main_new.py", line 307, in <module>',
    ),
    # pdsh host alone
    (
        "rdma-test-gpu-worker-1: Cuda failure 'initialization error'",
        "rdma-test-gpu-worker-1",
        None,
        None,
        None,
        "none",
        "Cuda failure 'initialization error'",
    ),
    # mpirun --tag-output
    (
        "[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
        "ip-172-32-45-165",
        23,
        None,
        None,
        "none",
        "ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument",
    ),
    # Ray worker with ip, then rank
    (
        "(RayTrainWorker pid=2273, ip=172.24.21.66) [rank7]:[W Utils.hpp:108] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarString)",
        "172.24.21.66",
        7,
        None,
        None,
        "none",
        "Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarString)",
    ),
    # vLLM worker TP rank
    (
        "(VllmWorker TP3 pid=432) ERROR 09-05 21:05:38 [multiproc_executor.py:596] WorkerProc hit an exception.",
        None,
        3,
        None,
        "2025-09-05T21:05:38.000000",
        "yearless",
        "WorkerProc hit an exception.",
    ),
    # vLLM worker rank=
    (
        '(VllmWorker rank=6 pid=409) ERROR 07-23 19:34:51 [multiproc_executor.py:487]     raise RuntimeError(f"NCCL error: {error_str}")',
        None,
        6,
        None,
        "2025-07-23T19:34:51.000000",
        "yearless",
        '    raise RuntimeError(f"NCCL error: {error_str}")',
    ),
    # vLLM worker in pasted colour codes
    (
        "^[[1;36m(VllmWorker rank=1 pid=13550)^[[0;0m INFO 08-12 08:45:18 [gpu_model_runner.py:2485] Graph capturing finished in 9 secs, took 1.30 GiB",
        None,
        1,
        None,
        "2025-08-12T08:45:18.000000",
        "yearless",
        "Graph capturing finished in 9 secs, took 1.30 GiB",
    ),
    # older vLLM logger
    (
        "(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 multiproc_worker_utils.py:233] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        None,
        None,
        None,
        "2025-10-14T12:32:47.000000",
        "yearless",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    ),
    # collector stamp (zoned) before a rank label
    (
        "2026-02-18T10:48:25.681Z [rank7]:[E218 10:48:25.033625188 ProcessGroupNCCL.cpp:632] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1512677, OpType=ALLREDUCE, NumelIn=306176, NumelOut=306176, Timeout(ms)=1200000) ran for 1200027 milliseconds before timing ",
        None,
        7,
        None,
        "2026-02-18T10:48:25.681000",
        "absolute",
        "[Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1512677, OpType=ALLREDUCE, NumelIn=306176, NumelOut=306176, Timeout(ms)=1200000) ran for 1200027 milliseconds before timing ",
    ),
    # collector stamp with a colon before mpirun's tag (github.com/NVIDIA/nccl/issues/230)
    (
        "2019-06-02T16:13:44.884Z: [1,12]<stdout>:container-e275-1553839402050-12124-01-000057:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
        "container-e275-1553839402050-12124-01-000057",
        12,
        None,
        "2019-06-02T16:13:44.884000",
        "absolute",
        "container-e275-1553839402050-12124-01-000057:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
    ),
    # mpirun --timestamp-output: a ctime glued to the tag (github.com/openucx/ucx/issues/2501)
    (
        "Tue Apr 10 02:29:25 2018[1,383]<stderr>:[clx-orion-095:15382:0:15382]    ud_iface.c:781  Fatal: transport error: Endpoint timeout",
        "clx-orion-095",
        383,
        None,
        "2018-04-10T02:29:25.000000",
        "naive_utc",
        "[clx-orion-095:15382:0:15382]    ud_iface.c:781  Fatal: transport error: Endpoint timeout",
    ),
    # horovodrun's tag has no job number (github.com/horovod/horovod/issues/2097)
    (
        "Fri Sep 25 16:52:36 2020[1]<stderr>:2020-09-25 16:52:36.515479: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1746] Adding visible gpu devices: 1",
        None,
        1,
        None,
        "2020-09-25T16:52:36.515479",
        "naive_utc",
        "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1746] Adding visible gpu devices: 1",
    ),
    # a rank label with a space instead of the colon (github.com/marin-community/marin/issues/7650)
    (
        "[rank3] WatchTasksAsync failed for task 3: UNAVAILABLE: failed to connect to all addresses",
        None,
        3,
        None,
        None,
        "none",
        "WatchTasksAsync failed for task 3: UNAVAILABLE: failed to connect to all addresses",
    ),
    # pdsh / DeepSpeed with an IP address for the host (github.com/huggingface/accelerate/issues/1317)
    (
        "104.171.201.171: │ ❱  81 │   │   torch.distributed.barrier()                                    │",
        "104.171.201.171",
        None,
        None,
        None,
        "none",
        "│ ❱  81 │   │   torch.distributed.barrier()                                    │",
    ),
    # DeepSpeed's pdsh launcher on its own node says "localhost": the rank, no node
    # (stark-sim/megatron-deepspeed-lock-clock, a two-node run's output)
    (
        "localhost: [rank0]: ncclUnhandledCudaError: Call to CUDA function failed.",
        None,
        0,
        None,
        None,
        "none",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
    ),
    # NCCL prints "-" for a host it hides: no node (github.com/mosaicml/diffusion/issues/110)
    (
        "-:6015:6224 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer draw4<59227>",
        None,
        None,
        None,
        None,
        "none",
        "-:6015:6224 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer draw4<59227>",
    ),
    # srun -l right-aligns its task ids (github.com/awslabs/awsome-distributed-ai/issues/445)
    (
        " 7: [rank80]: urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)",
        None,
        80,
        None,
        None,
        "none",
        "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)",
    ),
    # a collector stamp with its zone after a space, then Python logging's (github.com/NVIDIA/nccl/issues/1905)
    (
        "2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN communicator encountered a fatal error (detected in ncclIbTest)",
        "h100-28",
        None,
        None,
        "2025-11-09T07:39:31.043000",
        "absolute",
        "h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN communicator encountered a fatal error (detected in ncclIbTest)",
    ),
    # collector stamp (naive) before a rank label
    (
        "2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB. GPU 3 has a total capacity of 79.10 GiB of which 98.00 MiB is free. Process 387746 has 78.89 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 765.81 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        None,
        3,
        None,
        "2024-11-20T14:37:16.000000",
        "naive_utc",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB. GPU 3 has a total capacity of 79.10 GiB of which 98.00 MiB is free. Process 387746 has 78.89 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 765.81 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    ),
    # glog torch elastic
    (
        "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
        None,
        None,
        None,
        "2025-03-25T20:57:27.620000",
        "yearless",
        "failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
    ),
    # glog with a Windows path
    (
        "W0428 17:23:27.497000 11044 site-packages\\torch\\distributed\\elastic\\multiprocessing\\redirects.py:29] NOTE: Redirects are currently not supported in Windows or MacOs.",
        None,
        None,
        None,
        "2025-04-28T17:23:27.497000",
        "yearless",
        "NOTE: Redirects are currently not supported in Windows or MacOs.",
    ),
    # DeepSpeed launcher
    (
        "[2023-04-07 13:09:33,201] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 80",
        None,
        None,
        None,
        "2023-04-07T13:09:33.201000",
        "naive_utc",
        "[INFO] [launch.py:318:sigkill_handler] Killing subprocess 80",
    ),
    # tqdm bar with a traceback glued on
    (
        " 19%|█▉        | 3237/16700 [3:34:12<38:35:22, 10.32s/it]Traceback (most recent call last):",
        None,
        None,
        None,
        None,
        "none",
        "Traceback (most recent call last):",
    ),
    # tqdm bar with a Hugging Face log line glued on
    (
        "  1%|▍                                                                           | 10/1856 [04:16<13:02:24, 25.43s/it][INFO|trainer.py:2926] 2023-10-19 09:48:54,430 >> Saving model checkpoint to pt_output/chatglm_pt_checkpoint_deepspeed/checkpoint-10",
        None,
        None,
        None,
        "2023-10-19T09:48:54.430000",
        "naive_utc",
        "Saving model checkpoint to pt_output/chatglm_pt_checkpoint_deepspeed/checkpoint-10",
    ),
    # torchx replica and local rank
    (
        "trainer/0 [0]:E0927 12:07:22.643702 1012209 ProcessGroupNCCL.cpp:1356] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info.",
        None,
        0,
        0,
        "2025-09-27T12:07:22.643702",
        "yearless",
        "[PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info.",
    ),
    # NeMo-Run replica and tee local rank
    (
        "ining-demo/0 [default3]:Resuming from checkpoint, setting has_simulated_crash_happened to True!",
        None,
        None,
        3,
        None,
        "none",
        "Resuming from checkpoint, setting has_simulated_crash_happened to True!",
    ),
    # pasted line number before a rank label
    (
        "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
        None,
        0,
        None,
        "2025-03-21T02:07:08.408271",
        "yearless",
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    ),
    # slurmstepd with its node
    (
        "slurmstepd-gpu20-15: error: Detected 1 oom-kill event(s) in StepId=9411285.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        "gpu20-15",
        None,
        None,
        None,
        "none",
        "slurmstepd-gpu20-15: error: Detected 1 oom-kill event(s) in StepId=9411285.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
    ),
    # Ray worker and Ray's C++ logger
    (
        "(RayWorkerVllm pid=7046) [2024-04-16 00:03:25,080 E 7046 7269] logging.cc:361:     @     0x7f514b634520  (unknown)  (unknown)",
        None,
        None,
        None,
        "2024-04-16T00:03:25.080000",
        "naive_utc",
        "    @     0x7f514b634520  (unknown)  (unknown)",
    ),
    # NeMo logger
    (
        "[NeMo W 2025-07-16 09:08:27 nemo_logging:405] There were no checkpoints found in checkpoint_dir or no checkpoint folder at checkpoint_dir :/workspace/logs_15_07_curated. Training from scratch.",
        None,
        None,
        None,
        "2025-07-16T09:08:27.000000",
        "naive_utc",
        "There were no checkpoints found in checkpoint_dir or no checkpoint folder at checkpoint_dir :/workspace/logs_15_07_curated. Training from scratch.",
    ),
    # rank then torchtitan logger
    (
        "[rank0]:[titan] 2026-05-18 16:05:50,641 - root - WARNING - Error running lspci: [Errno 2] No such file or directory: 'lspci', fallback to use device_name",
        None,
        0,
        None,
        "2026-05-18T16:05:50.641000",
        "naive_utc",
        "Error running lspci: [Errno 2] No such file or directory: 'lspci', fallback to use device_name",
    ),
    # Taskcluster
    (
        "[task 2025-07-01T05:06:30.005+00:00] [train] [nvidia-smi(stdout)] Failed to initialize NVML: Driver/library version mismatch",
        None,
        None,
        None,
        "2025-07-01T05:06:30.005000",
        "absolute",
        "[nvidia-smi(stdout)] Failed to initialize NVML: Driver/library version mismatch",
    ),
    # PyTorch C++ log without a time
    (
        "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-DL8UIP5]:29500 (system error: 10049 - The requested address is not valid in its context.).",
        None,
        None,
        None,
        None,
        "none",
        "[c10d] The client socket has failed to connect to [DESKTOP-DL8UIP5]:29500 (system error: 10049 - The requested address is not valid in its context.).",
    ),
    # Hugging Face logger
    (
        "[INFO|trainer.py:4309] 2025-12-31 13:18:50,978 >> Saving model checkpoint to outputs/ezpz.hf_trainer/2025-12-31-131106/checkpoint-100",
        None,
        None,
        None,
        "2025-12-31T13:18:50.978000",
        "naive_utc",
        "Saving model checkpoint to outputs/ezpz.hf_trainer/2025-12-31-131106/checkpoint-100",
    ),
    # Ray worker and Ray's Python logger
    (
        "(BackendExecutor pid=5126, ip=10.128.0.32) 2022-02-15 16:53:52,097\tERROR utils.py:42 -- The actor died unexpectedly before finishing this task.",
        "10.128.0.32",
        None,
        None,
        "2022-02-15T16:53:52.097000",
        "naive_utc",
        "ERROR utils.py:42 -- The actor died unexpectedly before finishing this task.",
    ),
    # pdsh host before an NCCL line
    (
        "MLVM2: MLVM2:10802:10802 [7] NCCL INFO NET/Plugin : No plugin found, using internal implementation",
        "MLVM2",
        None,
        None,
        None,
        "none",
        "MLVM2:10802:10802 [7] NCCL INFO NET/Plugin : No plugin found, using internal implementation",
    ),
    # collector stamp before an NCCL line
    (
        "[2025-04-06 22:31:56] ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
        "ccw-gpu-128",
        None,
        None,
        "2025-04-06T22:31:56.000000",
        "naive_utc",
        "ccw-gpu-128:3485254:3487188 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
    ),
    # PyTorch C++ log (old, no time)
    (
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the",
        None,
        None,
        None,
        None,
        "none",
        "Some NCCL operations have failed or timed out. Due to the",
    ),
    # raylet
    (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: fffffffffffffffff5729b4c48481e2a8ef1526f02000000 Worker ID: 39a9e9de2949ebf1f2cbaee0f7000003dbd35e29cc781c9a0906fddd Node ID: 1f94cb553cfc9f9d59824d794d9e3fa7b16bcf528b398c4684e3020f Worker IP address: 172.26.143.83 Worker port: 10005 Worker PID: 833 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors. [repeated 8x across cluster]",
        "172.26.143.83",  # the rule reads the dead worker's address
        None,
        None,
        None,
        "none",
        "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: fffffffffffffffff5729b4c48481e2a8ef1526f02000000 Worker ID: 39a9e9de2949ebf1f2cbaee0f7000003dbd35e29cc781c9a0906fddd Node ID: 1f94cb553cfc9f9d59824d794d9e3fa7b16bcf528b398c4684e3020f Worker IP address: 172.26.143.83 Worker port: 10005 Worker PID: 833 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors. [repeated 8x across cluster]",
    ),
    # pasted line number before a C++ frame
    (
        "[1824] frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0xc80 (0x7eff524277a0 in /opt/conda/envs/ln/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)",
        None,
        None,
        None,
        None,
        "none",
        "[1824] frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0xc80 (0x7eff524277a0 in /opt/conda/envs/ln/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)",
    ),
    # Ray worker, indented continuation
    (
        "(TrainController pid=79312)   distributed_context=DistributedContext(world_rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0),",
        None,
        None,
        None,
        None,
        "none",
        "  distributed_context=DistributedContext(world_rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0),",
    ),
    # SGLang TP rank
    (
        "[2025-01-29 08:52:44 TP2] Using default MoE config. Performance might be sub-optimal! Config file not found at /home/ubuntu/.local/lib/python3.10/site-packages/sglang/srt/layers/moe/fused_moe_triton/configs/E=160,N=192,device_name=NVIDIA_A100-SXM4-80GB.json",
        None,
        2,
        None,
        "2025-01-29T08:52:44.000000",
        "naive_utc",
        "Using default MoE config. Performance might be sub-optimal! Config file not found at /home/ubuntu/.local/lib/python3.10/site-packages/sglang/srt/layers/moe/fused_moe_triton/configs/E=160,N=192,device_name=NVIDIA_A100-SXM4-80GB.json",
    ),
    # a stamp followed by a colon (MIC-DKFZ/nnUNet#1254), a bar (PeihaoChen/RSPNet#3) or the
    # next bracket (Hydra; MCG-NJU/RTD-Action#31); the Hugging Face example scripts' logging
    # (huggingface/notebooks: diffusers/SDXL_Dreambooth_LoRA_advanced_example.ipynb)
    (
        "2022-12-12 11:06:50.304311: saving checkpoint...",
        None,
        None,
        None,
        "2022-12-12T11:06:50.304311",
        "naive_utc",
        "saving checkpoint...",
    ),
    (
        '2021-07-08 02:04:46,333|INFO    |Saving checkpoint to "exps/ucf101-r2plus1d/checkpoint.pth.tar"',
        None,
        None,
        None,
        "2021-07-08T02:04:46.333000",
        "naive_utc",
        'INFO    |Saving checkpoint to "exps/ucf101-r2plus1d/checkpoint.pth.tar"',
    ),
    (
        "[2024-02-22 19:20:17,149][datasets.builder][WARNING] - Found cached dataset json (/root/.cache/huggingface/datasets/json/default-70dc00f935d3701b/0.0.0/8bb11242116d547c741b2e8a1f18598ffdd40a1d4f2a2872c7a28b697434bc96)",
        None,
        None,
        None,
        "2024-02-22T19:20:17.149000",
        "naive_utc",
        "[datasets.builder][WARNING] - Found cached dataset json (/root/.cache/huggingface/datasets/json/default-70dc00f935d3701b/0.0.0/8bb11242116d547c741b2e8a1f18598ffdd40a1d4f2a2872c7a28b697434bc96)",
    ),
    (
        "12/04/2023 08:53:53 - INFO - __main__ - ***** Running training *****",
        None,
        None,
        None,
        "2023-12-04T08:53:53.000000",
        "naive_utc",
        "INFO - __main__ - ***** Running training *****",
    ),
]


def _lines(text: str, kind: str = "job"):
    ctx = SourceContext(source="job.log", kind=kind, ref_date=DAY, full=True)
    return parse_stream(io.BytesIO(text.encode()), ctx).per_line


@pytest.mark.parametrize("line,node,rank,local_rank,ts,src,msg", CASES, ids=[c[0][:48] for c in CASES])
def test_launcher_label(line, node, rank, local_rank, ts, src, msg):
    row = _lines(line + "\n").row(0, named=True)
    got_ts = row["ts"].strftime("%Y-%m-%dT%H:%M:%S.%f") if row["ts"] else None
    assert (row["node"], row["rank"], row["local_rank"], got_ts, row["ts_source"]) == (node, rank, local_rank, ts, src)
    assert row["msg"] == msg


def test_local_rank_is_in_the_classify_output():
    ctx = SourceContext(source="job.log", kind="job", ref_date=DAY, full=True)
    res = parse_stream(io.BytesIO(b"[default0]:[rank12]:[E817 17:40:34.227531918 ProcessGroupNCCL.cpp:1515] x\n"), ctx)
    rec = per_line_records(res, "job.log").row(0, named=True)
    assert (rec["rank"], rec["local_rank"]) == (12, 0)


def test_an_exception_name_is_not_a_host_label():
    row = _lines("RuntimeError: CUDA error: an illegal memory access was encountered\n").row(0, named=True)
    assert row["node"] is None and row["msg"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert row["category"] == "user_app"


def test_launcher_labels_are_read_in_job_output_only():
    # a kernel oops' register dump (corpus) starts like a pdsh host label: kernel logs keep it
    line = "R10: 0000000000000000 R11: 0000000000000246 R12: ffffffffa057f5c8"
    kernel = _lines(line + "\n", kind="kernel").row(0, named=True)
    assert kernel["msg"] == line and kernel["node"] is None


def test_continuations_behind_a_pdsh_label_join_their_event():
    # DeepSpeed's pdsh launcher: every line of the worker's traceback behind "host: "
    text = (
        'rdma-test-gpu-worker-1:   File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 3665, in barrier\n'
        "rdma-test-gpu-worker-1:     work = default_pg.barrier(opts=opts)\n"
        "rdma-test-gpu-worker-1: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3\n"
        "rdma-test-gpu-worker-1: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "rdma-test-gpu-worker-1: Last error:\n"
        "rdma-test-gpu-worker-1: Cuda failure 'initialization error'\n"
    )
    ctx = SourceContext(source="job.log", kind="job", ref_date=DAY, full=True)
    res = parse_stream(io.BytesIO(text.encode()), ctx)
    assert res.events.select("line_no", "line_count", "node", "category").rows() == [
        (1, 6, "rdma-test-gpu-worker-1", "unknown")
    ]


def test_job_output_and_kernel_lines_parse_in_one_batch(tmp_path):
    from faultline.ingest.parse import parse_files

    job, kern = tmp_path / "job.log", tmp_path / "kern.log"
    job.write_text("[2025-01-29 08:52:44 TP2] RuntimeError: CUDA error: an illegal memory access was encountered\n")
    # NVIDIA/nvidia-docker#1553
    kern.write_text("kernel: NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.\n")
    res = parse_files(
        [
            (job, SourceContext(source="job.log", kind="job", ref_date=DAY)),
            (kern, SourceContext(source="kern.log", kind="kernel", ref_date=DAY)),
        ]
    )
    assert [r.events.select("category", "rank").rows() for r in res] == [[("user_app", 2)], [("gpu_bus_lost", None)]]
