"""Templates (``classify.engine.mask_template``): real lines of one kind that differ only in a
host name, a task, a rank or an address share a template; device names that look like host
names keep theirs. Lines from models/corpus/dev.jsonl and tests/fixtures/jobs/dev/ (message part)."""

from __future__ import annotations

import pytest

from faultline.classify.training_data import mask

SAME = [
    # srun names the host and the task; both vary between lines of one kind
    (
        "srun: error: Orion-01-01: task 4: Out Of Memory",  # corpus: hafs-community/HAFS#101
        "srun: error: gpu20-15: task 0: Out Of Memory",  # fixtures/jobs/dev/knet-30-slurm-cgroup-oom
    ),
    (
        "srun: error: cn125: task 0: Segmentation fault (core dumped)",  # corpus: ai4d-iasc/trixie#35
        "srun: error: cn110: task 0: Segmentation fault (core dumped)",
    ),
    # the torch rank prefix
    (
        "[rank4]:[E916 08:53:53.863594849 ProcessGroupNCCL.cpp:699] [Rank 4] To avoid data inconsistency, "
        "we are taking the entire process down.",
        "[rank2]:[E916 08:53:53.863609204 ProcessGroupNCCL.cpp:699] [Rank 2] To avoid data inconsistency, "
        "we are taking the entire process down.",
    ),
    # AWS host names, written like addresses
    (
        "INFO: Function: main Line: 49: NET/OFI Process rank 0 started. NCCLNet device used on ip-172-0-1-23 "
        "is AWS Libfabric.",
        "INFO: Function: main Line: 49: NET/OFI Process rank 1 started. NCCLNet device used on ip-172-0-1-161 "
        "is AWS Libfabric.",
    ),
]

EXACT = [
    ("srun: error: Orion-18-69: task 289: Bus error", "srun: error: <NODE>: task <NUM>: Bus error"),
    (
        "srun: error: slurm-job-compute-0-1: tasks 8-13,15: Exited with exit code 1",
        "srun: error: <NODE>: tasks <NUM>-<NUM>,<NUM>: Exited with exit code <NUM>",
    ),
    # a Lustre target (file system, target, client id) and its server address
    (
        "Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection to no2zxbmv-MDT0000 (at 10.0.47.232@tcp) "
        "was lost; in progress operations using this service will wait for recovery to complete",
        "Lustre: <NODE>: Connection to <NODE> (at <IP>@tcp) was lost; in progress operations using this "
        "service will wait for recovery to complete",
    ),
    # an NVSwitch is a device, not a host
    (
        "nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)",
        "nvidia-nvswitch0: SXid (PCI:<PCI>): <NUM>, Fatal, Link <NUM> sourcetrack timeout error (First)",
    ),
]


@pytest.mark.parametrize("a,b", SAME)
def test_lines_of_one_kind_share_a_template(a, b):
    ta, tb = mask([a, b]).to_list()
    assert ta == tb
    assert ta != a


@pytest.mark.parametrize("line,template", EXACT)
def test_templates(line, template):
    assert mask([line]).to_list() == [template]
