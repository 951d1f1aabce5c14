"""models/fallback.yaml: an error-looking line no rule matches is benign when it reports nothing
wrong, else placed by the subsystem it names, else unknown; rules always come first. Lines are
real (models/corpus/dev.jsonl holds each with its source)."""

from __future__ import annotations

import polars as pl
import pytest

from faultline.classify.engine import classify_messages
from faultline.classify.ruleset import load_ruleset


def verdicts(*msgs: str) -> list[tuple[str, str | None]]:
    got = classify_messages(pl.Series(list(msgs)), load_ruleset())
    return list(zip(got["category"], got["rule_id"]))


@pytest.mark.parametrize(
    "msg",
    [
        "No PCIe AER errors.",  # Azure/azhpc-diagnostics
        " scan: scrub repaired 0 in 1h18m with 0 errors on Tue Nov  6 22:47:38 2012",  # zfs status
        "Predictive Failure Count: 0",  # hpssacli
        "# 6  Extended offline    Completed without error       00%       245         -",  # smartctl
        "        Uncorrectable Error               : 0",  # nvidia-smi -q
        "            SRAM Uncorrectable Parity     : 0",  # nvidia-smi -q, leptonai/gpud testdata
        "            DRAM Uncorrectable            : 0",  # the same
        " Failed Devices : 0",  # mdadm --detail, 1000001101000/Debian_on_Buffalo#87
    ],
)
def test_a_zero_count_or_a_negation_is_benign(msg):
    assert verdicts(msg) == [("benign", "fallback:zero_count")]


@pytest.mark.parametrize(
    "msg",
    [
        "                SRAM Threshold Exceeded       : No",  # nvidia-smi -q, HPE-Japan-Presales/e-learning
        "        BAD_PAGE_THRESHOLD_EXCEEDED: N/A",  # amd-smi, ROCm/rocm-systems#2987
        "  Pack is about to fail & should be replaced : No",  # MegaCLI, glensc/nagios-plugin-check_raid
    ],
)
def test_a_field_whose_value_says_no_is_benign(msg):
    assert verdicts(msg) == [("benign", "fallback:negative_field")]


@pytest.mark.parametrize(
    "msg",
    [
        "    Failed Devices : 1",  # mdadm --detail, kiwix/operations#514
        "Exit Type: USER_FAILURE",  # microsoft/pai#5464
        "Status:         Failed",  # kubeflow/trainer#301
    ],
)
def test_a_field_whose_value_is_a_failure_is_no_negative_field(msg):
    assert verdicts(msg)[0][1] != "fallback:negative_field"


@pytest.mark.parametrize(
    "msg, category, entry",
    [
        ("Adapter 0: Array Drive 0: FAIL state entered", "storage", "storage"),
        ("Error 3 occurred at disk power-on lifetime: 2731 hours (113 days + 19 hours)", "storage", "storage"),
        ("eth0: Lost carrier", "network", "network"),
        ("infiniband rdmap0s6: Wait for completion (polling) timeout", "network", "network"),
        ("Power supply redundancy is lost.", "thermal_power", "thermal_power"),
        ("CPU 0: Machine Check Exception: 0000000000000007", "host", "host"),
        (
            "Job for nvidia-fabricmanager.service failed because the control process exited with error code.",
            "nvlink",
            "nvlink",
        ),
    ],
)
def test_an_unmatched_error_line_is_placed_by_the_subsystem_it_names(msg, category, entry):
    assert verdicts(msg) == [(category, f"fallback:{entry}")]


def test_rules_come_first_and_a_line_without_an_error_word_or_a_subject_is_untouched():
    got = verdicts(
        "blk_update_request: I/O error, dev sda, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
        "Buffer I/O error on dev sr0, logical block 0, async page read",  # a rule calls it benign
        "status_field : 0x4502",  # no error word
        "socket.timeout: timed out",  # names no subsystem
    )
    assert got == [
        ("storage", "block_io_error"),
        ("benign", "removable_drive_io_error"),
        ("benign", None),
        ("unknown", "error_words"),
    ]


def test_a_placed_line_has_the_entrys_family_and_action_and_a_warning_severity():
    got = classify_messages(pl.Series(["eth0: Lost carrier", "No Memory errors."]), load_ruleset())
    assert got.select("family", "severity", "action").rows() == [
        ("nic", "warning", "check_network"),
        (None, "info", "none"),
    ]


def test_error_words_only_inside_snake_case_names_or_in_a_tolerated_error_are_benign():
    got = verdicts(
        "Resuming from checkpoint, setting has_simulated_crash_happened to True!",  # NVIDIA/NeMo resiliency demo
        "Error getting the graphics pids for GPU 0. Status = -32 skipping check.",  # DCGM nvvs.log
        "state ZPOOL_STATUS_FAILING_DEV reported",  # an upper-case error code stays an error
    )
    assert [c for c, _ in got] == ["benign", "benign", "unknown"]
    assert [r for _, r in got][:2] == ["fallback:identifier", "fallback:tolerated"]
