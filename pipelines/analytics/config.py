"""Tunable windows and thresholds of the analytics, with the published practice they follow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AnalyticsConfig:
    # NCSA Delta: identical (GPU, Xid) records within 5 s are one error
    burst_window_s: float = 5.0
    # one node, one category: events this close belong to one incident
    node_incident_window_s: float = 600.0
    # incidents on several nodes of one rack (or leaf switch) this close: a rack incident
    rack_incident_window_s: float = 600.0
    rack_incident_min_nodes: int = 3
    # a node's kernel clock may be off (NTP broken): when its incidents repeatedly line up with
    # its rack-mates' at one fixed lag (at least this many times, within this range), the lag
    # is its clock's offset and rack correlation uses the corrected time
    clock_offset_min_support: int = 2
    clock_offset_max_s: float = 6 * 3600.0
    # Meta attributes a cause seen 10 min before to 5 min after a job's end; a hang lasts the
    # NCCL timeout (PyTorch default 10 min) on top, so look back further than 10 min
    attribution_before_s: float = 1800.0
    attribution_after_s: float = 300.0
    # a job-log user error this close to a hardware event on the job's nodes is its symptom
    hardware_masks_user_s: float = 180.0
    # lemon / hotspot tests: Benjamini-Hochberg false discovery rate, and minimum counts
    fdr: float = 0.05
    lemon_min_incidents: int = 3
    rack_min_incidents: int = 4
    # the same GPU failing the same serious hardware way again within this window, tested against
    # its cluster's other GPUs and corrected over every GPU and category: two in a month count
    # only where that fault is rare (simulate/TRUTH.md, "Which lemons count")
    repeat_gpu_fault_incidents: int = 2
    repeat_gpu_fault_window_days: float = 30.0
    repeat_gpu_fault_categories: tuple[str, ...] = ("gpu_memory", "gpu_hardware", "gpu_bus_lost")
    gpus_per_node: int = 8


DEFAULT = AnalyticsConfig()
