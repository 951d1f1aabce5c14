"""Line shapes of job stdout/stderr: NCCL, PyTorch (per version), torchrun, srun/slurmstepd."""

from __future__ import annotations

MS = 1_000
S = 1_000_000

# torch_v: 0 = 2.1 (plain c10 logging), 1 = 2.3 ([rankN]: prefix), 2 = 2.4 (glog time), 3 = 2.5+ (PG GUID)
WORK = (
    "WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={tms}) "
    "ran for {ran} milliseconds before timing out."
)
WATCHDOG = {
    0: (
        (0, "[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation timeout: " + WORK),
        (
            1,
            "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
            "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        ),
        (2, "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down."),
        (
            3,
            "[E ProcessGroupNCCL.cpp:916] [Rank {rank}] NCCL watchdog thread terminated with exception: [Rank {rank}] "
            "Watchdog caught collective operation timeout: " + WORK,
        ),
        (4, "terminate called after throwing an instance of 'std::runtime_error'"),
        (
            5,
            "  what():  [Rank {rank}] NCCL watchdog thread terminated with exception: [Rank {rank}] Watchdog caught "
            "collective operation timeout: " + WORK,
        ),
    ),
    1: (
        (
            0,
            "[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
            + WORK,
        ),
        (
            1,
            "[rank{rank}]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank {rank}] Timeout at NCCL work: {seq}, last enqueued "
            "NCCL work: {seq}, last completed NCCL work: {seqm1}.",
        ),
        (
            2,
            "[rank{rank}]:[E ProcessGroupNCCL.cpp:577] [Rank {rank}] Some NCCL operations have failed or timed out. Due "
            "to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        ),
        (
            3,
            "[rank{rank}]:[E ProcessGroupNCCL.cpp:583] [Rank {rank}] To avoid data inconsistency, we are taking the "
            "entire process down.",
        ),
        (4, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        (
            5,
            "  what():  [PG 0 Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] "
            "Watchdog caught collective operation timeout: " + WORK,
        ),
    ),
    2: (
        (
            0,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: "
            + WORK,
        ),
        (
            1,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {rank}] failure detected by "
            "watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seqm1}",
        ),
        (
            2,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:681] [Rank {rank}] To avoid data inconsistency, we are taking "
            "the entire process down.",
        ),
        (3, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        (
            4,
            "  what():  [PG 0 (default_pg) Rank {rank}] Process group watchdog thread terminated with exception: "
            "[Rank {rank}] Watchdog caught collective operation timeout: " + WORK,
        ),
        (
            5,
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:634 (most recent call first):",
        ),
        (
            6,
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c2e5b9f86 in "
            "/usr/local/lib/python{py}/dist-packages/torch/lib/libc10.so)",
        ),
    ),
    3: (
        (
            0,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog "
            "caught collective operation timeout: " + WORK,
        ),
        (
            1,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception "
            "(either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last "
            "completed NCCL work: {seqm1}.",
        ),
        (
            2,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:630] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Some NCCL "
            "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
            "operations might run on corrupted/incomplete data.",
        ),
        (
            3,
            "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:636] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] To avoid "
            "data inconsistency, we are taking the entire process down.",
        ),
        (4, "terminate called after throwing an instance of 'c10::DistBackendError'"),
        (
            5,
            "  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
            "exception: [Rank {rank}] Watchdog caught collective operation timeout: " + WORK,
        ),
        (
            6,
            "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):",
        ),
        (
            7,
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f8e4c96c1b8 in "
            "/usr/local/lib/python{py}/dist-packages/torch/lib/libc10.so)",
        ),
        (
            8,
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
            "std::ratio<1l, 1000l> > >) + 0x23d (0x7f8e4dc8f8bd in /usr/local/lib/python{py}/dist-packages/torch/lib/libtorch_cuda.so)",
        ),
    ),
}
DESYNC = {  # with desync debugging on, a rank whose watchdog fired prints this just before its watchdog block
    0: "[E ProcessGroupNCCL.cpp:1240] [Rank {rank}] Desync debugging: [{culprit_rank}] finished collective #{seqm1}, but didn't join collective #{seq}",
    1: "[rank{rank}]:[E ProcessGroupNCCL.cpp:1240] [PG 0 Rank {rank}] Desync debugging: [{culprit_rank}] finished collective #{seqm1}, but didn't join collective #{seq}",
    2: "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1308] [PG 0 (default_pg) Rank {rank}] Desync debugging: [{culprit_rank}] finished collective #{seqm1}, but didn't join collective #{seq}",
    3: "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1308] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Desync debugging: [{culprit_rank}] finished collective #{seqm1}, but didn't join collective #{seq}",
}

# torchrun agent lines: old logging (torch 2.1/2.3) and glog style (2.4+)
AGENT_FAILED = {
    False: "[{pylog}] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: {ec}) local_rank: {flr} (pid: {fpid}) of binary: /usr/bin/python3",
    True: "E{glog6} {apid} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {ec}) local_rank: {flr} (pid: {fpid}) of binary: /usr/bin/python3",
}
AGENT_SIGTERM = {
    False: "[{pylog}] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process {pid} closing signal SIGTERM",
    True: "W{glog6} {apid} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} closing signal SIGTERM",
}
AGENT_START = {
    False: "[{pylog}] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS environment variable for each process "
    "to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal "
    "performance in your application as needed.",
    True: "W{glog6} {apid} torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process "
    "to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal "
    "performance in your application as needed.",
}
AGENT_DONE = {
    False: "[{pylog}] torch.distributed.elastic.agent.server.api: [INFO] [default] worker group successfully finished. "
    "Waiting 300 seconds for other agents to finish.",
    True: "I{glog6} {apid} torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully "
    "finished. Waiting 300 seconds for other agents to finish.",
}
CHILD_FAILED = (
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python{py}/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
    "    return f(*args, **kwargs)",
    '  File "/usr/local/lib/python{py}/dist-packages/torch/distributed/run.py", line 919, in main',
    "    run(args)",
    '  File "/usr/local/lib/python{py}/dist-packages/torch/distributed/run.py", line 910, in run',
    "    elastic_launch(",
    '  File "/usr/local/lib/python{py}/dist-packages/torch/distributed/launcher/api.py", line 138, in __call__',
    "    return launch_agent(self._config, self._entrypoint, list(args))",
    '  File "/usr/local/lib/python{py}/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent',
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : {tr_time}",
    "  host      : {host}",
    "  rank      : {frank} (local_rank: {flr})",
    "  exitcode  : {ec} (pid: {fpid})",
    "  error_file: <N/A>",
    "  traceback : {tb}",
    "============================================================",
)

NCCL_RANK0 = (
    (0, "{host}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using {netdev0}:{ip}<0>"),
    (1, "{host}:{pid}:{pid} [0] NCCL INFO NCCL version {nccl}+cuda{cuda}"),
)
NCCL_RANK = (
    (
        10 * MS,
        "{host}:{pid}:{tid} [{lr}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
        "[3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB {netdev0}:{ip}<0>",
    ),
    (
        40 * MS,
        "{host}:{pid}:{tid} [{lr}] NCCL INFO comm 0x{comm} rank {rank} nranks {nranks} cudaDev {lr} nvmlDev {lr} "
        "busId {busid} commId 0x{commid} - Init START",
    ),
    (900 * MS, "{host}:{pid}:{tid} [{lr}] NCCL INFO {channel}"),
    (1400 * MS, "{host}:{pid}:{tid} [{lr}] NCCL INFO Connected all rings"),
    (
        1900 * MS,
        "{host}:{pid}:{tid} [{lr}] NCCL INFO comm 0x{comm} rank {rank} nranks {nranks} cudaDev {lr} nvmlDev {lr} "
        "busId {busid} commId 0x{commid} - Init COMPLETE",
    ),
)

TB_HEAD = (
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 412, in <module>',
    "    main()",
    '  File "/workspace/train.py", line 388, in main',
    "    loss = train_step(model, batch, optimizer)",
    '  File "/workspace/train.py", line 201, in train_step',
    "    {code}",
)
CUDA_HINTS = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)
PY_EXCEPTIONS = (  # (failing code line, exception line); {shard} is filled per job
    (
        "batch = next(data_iter)",
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/shards/shard-{shard}.parquet'",
    ),
    ('input_ids = batch["input_ids"].cuda(non_blocking=True)', "KeyError: 'input_ids'"),
    ("outputs = model(**batch)", "TypeError: forward() got an unexpected keyword argument 'attention_mask'"),
    (
        "loss = criterion(logits.view(-1, logits.size(-1)), labels.view(-1))",
        "ValueError: Expected input batch_size (16384) to match target batch_size (8192).",
    ),
    (
        "attn = torch.matmul(q, k.transpose(-2, -1))",
        "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 2",
    ),
    (
        'state = torch.load(ckpt_path, map_location="cpu")',
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
    ),
    ('assert not torch.isnan(loss), "loss is NaN"', "AssertionError: loss is NaN"),
    ("import torch", "OSError: libmkl_intel_lp64.so.3: cannot open shared object file"),  # saforem2/ezpz#222
    ("from flash_attn import flash_attn_func", "ModuleNotFoundError: No module named 'flash_attn'"),
    ("hidden = self.norm(hidden)", "AttributeError: 'NoneType' object has no attribute 'shape'"),
)
OOM_NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU {lr} has a total capacity "
    "of {cap} GiB of which {free} MiB is free. Process {pid} has {used} GiB memory in use. Of the allocated "
    "memory {a1} GiB is allocated by PyTorch, and {a2} GiB is reserved by PyTorch but unallocated. If reserved "
    "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
OOM_OLD = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB (GPU {lr}; {cap} GiB total "
    "capacity; {a1} GiB already allocated; {free} MiB free; {used} GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for "
    "Memory Management and PYTORCH_CUDA_ALLOC_CONF"
)
DEVICE_ASSERT = (
    "../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [{blk},0,0], thread: "
    "[{thr},0,0] Assertion `srcIndex < srcSelectDimSize` failed."
)
NCCL_IB_WARN = (
    "{host}:{pid}:{tid} [{lr}] {ib_file}NCCL WARN NET/IB : Got completion from peer {peer_ip}<{port}> with "
    "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{ip} remoteGid ::ffff:{peer_ip}"
)
NCCL_IB_ERR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "remote process exited or there was a network error, NCCL version {nccl}",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "Last error:",
    "NET/IB : Got completion from peer {peer_ip}<{port}> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
    "localGid ::ffff:{ip} remoteGid ::ffff:{peer_ip}",
)
CUDA_NCCL_WARN = (
    "{host}:{pid}:{tid} [{lr}] {cuda_file}NCCL WARN Cuda failure 700 'an illegal memory access was encountered'"
)

# Training progress, checkpoint saves and restart loads, per stack: the shapes of real lines of
# models/corpus/dev.jsonl (torchtitan, Megatron-LM, DeepSpeed, NeMo, HF Trainer) with this job's
# numbers, stamps and paths. (offset µs, template) pairs, as ``templates.expand`` takes them.
PROGRESS = {
    "torchtitan": (
        (
            0,
            "[titan] {pylog} - root - INFO - step: {step}  loss:  {loss}  memory: 49.66GiB(52.28%)  "
            "tps: {tps_comma}  tflops: 338.65  mfu: 34.24%",
        ),
    ),
    "megatron": (
        (
            0,
            " [{ymd_hms}] iteration {step_r8}/{total_r8} | consumed samples: {samples_r12} | elapsed time per "
            "iteration (ms): {ms_per_it} | learning rate: 1.000000E-05 | global batch size: {gbs_r5} | lm loss: "
            "{loss_e} | loss scale: 1.0 | grad norm: {gnorm} | number of skipped iterations:   0 | number of nan "
            "iterations:   0 |",
        ),
    ),
    "deepspeed": (
        (
            0,
            "[{pylog}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
        ),
        (
            1000,
            "[{pylog}] [INFO] [timer.py:215:stop] epoch=0/micro_step={step}/global_step={step}, "
            "RunningAvgSamplesPerSec={sps_avg}, CurrSamplesPerSec={sps}, MemAllocated=0.06GB, MaxMemAllocated=1.68GB",
        ),
    ),
    "nemo": (
        (
            0,
            "Training epoch 0, iteration {step}/{total} | lr: 1.649e-06 | consumed_samples: {samples} | "
            "global_batch_size: 512 | global_step: {step} | reduced_train_loss: {loss} | train_step_timing in s: "
            "{s_per_it}",
        ),
    ),
    "hf-trainer": (
        (
            0,
            "{'loss': {loss}, 'grad_norm': {gnorm}, 'learning_rate': 4.5e-05, 'epoch': {epoch}, "
            "'num_input_tokens_seen': {tokens}, 'train_runtime': {runtime}, 'train_tokens_per_second': {tps}}",
        ),
    ),
}
SAVE = {
    "torchtitan": (
        (0, "[titan] {pylog} - root - INFO - Saving the checkpoint (or staging if async is enabled)."),
        (
            20_000,
            "[titan] {pylog} - root - INFO - Finished saving the checkpoint (or staging if async is enabled)in "
            "0.02 seconds.",
        ),
    ),
    "megatron": (
        (0, "saving checkpoint at iteration {step_r7} to /checkpoints/{name}"),
        (2_000_000, "  successfully saved checkpoint at iteration {step_r7} to /checkpoints/{name}"),
    ),
    "deepspeed": (
        (
            0,
            "[{pylog}] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step{step} is about to be saved!",
        ),
        (
            2000,
            "[{pylog}] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: "
            "/checkpoints/{name}/global_step{step}/mp_rank_00_model_states.pt",
        ),
        (
            2_000_000,
            "[{pylog}] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step{step} is ready now!",
        ),
    ),
    "nemo": (
        (
            0,
            "[NeMo I {ymd_hms} nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: {step} : Start "
            "time: {epoch_s}s : Save duration: 0.232s",
        ),
        (
            3_000_000,
            "[NeMo I {ymd_hms} nemo_logging:393] Successfully saved checkpoint from iteration {step_r6} to "
            "/checkpoints/{name}/checkpoints/model_name=0--step={step}-last.ckpt",
        ),
    ),
    "hf-trainer": (
        (0, "[INFO|trainer.py:3984] {pylog} >> Saving model checkpoint to /checkpoints/{name}/checkpoint-{step}"),
        (
            3_000_000,
            "[INFO|modeling_utils.py:3572] {pylog} >> Model weights saved in "
            "/checkpoints/{name}/checkpoint-{step}/model.safetensors",
        ),
    ),
}
LOAD = {
    "torchtitan": (
        (0, "[titan] {pylog} - root - INFO - Loading the checkpoint at step {resume_step}."),
        (3_000_000, "[titan] {pylog} - root - INFO - Finished loading the checkpoint in 3.00 seconds."),
    ),
    "megatron": (
        (0, "  successfully loaded checkpoint from /checkpoints/{name} [ t 0, p 0 ] at iteration {resume_step}"),
    ),
    "deepspeed": (
        (
            0,
            "[{pylog}] [INFO] [torch_checkpoint_engine.py:23:load] [Torch] Loading checkpoint from "
            "/checkpoints/{name}/global_step{resume_step}/zero_pp_rank_0_mp_rank_00_optim_states.pt...",
        ),
        (
            3_000_000,
            "[{pylog}] [INFO] [torch_checkpoint_engine.py:25:load] [Torch] Loaded checkpoint from "
            "/checkpoints/{name}/global_step{resume_step}/zero_pp_rank_0_mp_rank_00_optim_states.pt.",
        ),
    ),
    "nemo": (
        (
            0,
            "Restoring states from the checkpoint path at "
            "/checkpoints/{name}/checkpoints/model_name=0--step={resume_step}-last/weights",
        ),
        (
            1_000_000,
            "[NeMo I {ymd_hms} distrib_optimizer:705] Loading distributed optimizer sharded state of type "
            "fully_sharded_model_space",
        ),
        (
            2_000_000,
            "Restored all states from the checkpoint at "
            "/checkpoints/{name}/checkpoints/model_name=0--step={resume_step}-last/weights",
        ),
    ),
    "hf-trainer": ((0, "[INFO|trainer.py:1791] {pylog} >>   Continuing training from global step {resume_step}"),),
}

STEPD = {
    "timeout": "slurmstepd: error: *** JOB {jid} ON {host0} CANCELLED AT {iso_s} DUE TO TIME LIMIT ***",
    "cancelled": "slurmstepd: error: *** JOB {jid} ON {host0} CANCELLED AT {iso_s} ***",
    "preempted": "slurmstepd: error: *** JOB {jid} ON {host0} CANCELLED AT {iso_s} DUE TO PREEMPTION ***",
    "node_fail": "slurmstepd: error: *** JOB {jid} ON {host0} CANCELLED AT {iso_s} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
    "step_cancel": "slurmstepd: error: *** STEP {jid}.0 ON {host0} CANCELLED AT {iso_s} ***",
    "oom": "slurmstepd: error: Detected 1 oom-kill event(s) in StepId={jid}.0. Some of your processes may have been "
    "killed by the cgroup out-of-memory handler.",
}
SRUN_EXIT = "srun: error: {host}: task {node_i}: Exited with exit code 1"
SRUN_OOM = "srun: error: {host}: task {node_i}: Out Of Memory"
SRUN_ABORT = "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."
SRUN_NODE_FAIL = "srun: error: Node failure on {chost}"
