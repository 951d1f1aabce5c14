"""Named scenarios: fleet size, duration and the knobs that shape faults and volume."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    providers: int
    nodes: int
    days: int
    start_date: str = "2026-11-01"
    noise: int = 12_000
    """Bytes of benign kernel noise per node-day (AER corrected, Xid 63, veth, perf...)."""
    base_rate: float = 4.0
    """Independent infrastructure faults per 1,000 node-days before multipliers."""
    provider_multipliers: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    """Cycled over providers (the lottery between providers)."""
    cluster_sigma: float = 0.35
    """Log-normal spread of the per-cluster multiplier (the lottery inside a provider)."""
    cluster_target: int = 40
    """Roughly this many nodes per cluster (1-4 clusters per provider)."""
    lemon_fraction: float = 0.015
    lemon_multiplier: tuple[float, float] = (10.0, 30.0)
    lemon_components: tuple[str, ...] = ()
    """Components the lemons fail through (empty: drawn by ``catalog.LEMON_COMPONENTS`` weight)."""
    lemon_min_faults: int = 0
    """Each lemon's failing part fails at least this often in the window (a short demo's lemon shows)."""
    bad_rack_fraction: float = 0.02
    flap_episodes_per_day: float = 0.5
    """Correlated link-flap episodes per bad rack per day."""
    benign_xid63_per_node_day: float = 0.02
    skew_fraction: float = 0.01
    completed_log_fraction: float = 0.15
    other_log_fraction: float = 1.0
    """Share of cancelled / preempted jobs whose stdout is kept (failed and timed-out jobs: always)."""
    utilisation: float = 0.9
    warm_start: bool = False
    """False: the fleet boots at the window start (every node prints its GPU identities on day 1).
    True: nodes booted days earlier and jobs are already running (steady state for short windows)."""
    missing_log_fraction: float = 0.002
    """Node-days whose kernel log never arrived (shipper broken)."""
    price_factors: tuple[float, ...] = (1.0,)
    """Cycled over providers: each charges its GPU models' list price (fleet.GPU_LIST_PRICE) times this."""
    price_change: tuple[int, int, float] | None = None
    """(provider index, day, factor): from that day of the window on, that provider charges factor x its price."""
    extra: dict = field(default_factory=dict)

    def with_overrides(self, **kw) -> Scenario:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


SCENARIOS: dict[str, Scenario] = {
    "demo": Scenario(
        name="demo",
        description="3 providers, ~100 nodes, 7 days; seconds to generate; providers of clearly different quality "
        "(fault rates compressed ~4x so one week shows every category)",
        providers=3,
        nodes=96,
        days=7,
        noise=12_000,
        base_rate=20.0,
        provider_multipliers=(0.4, 1.2, 4.0),
        cluster_target=14,
        lemon_fraction=0.012,
        lemon_multiplier=(15.0, 30.0),
        lemon_components=("hbm",),  # Xid 48 / 95: a memory lemon, whose Xid 95s flood the log
        lemon_min_faults=4,
        bad_rack_fraction=0.03,
        flap_episodes_per_day=0.6,
        benign_xid63_per_node_day=0.05,
        skew_fraction=0.02,
        completed_log_fraction=0.3,
        price_factors=(1.08, 1.0, 1.0),
        price_change=(2, 4, 0.9),
    ),
    "lottery": Scenario(
        name="lottery",
        description="5 providers, 512 nodes, 30 days; strong provider and cluster differences, sized for evaluation",
        providers=5,
        nodes=512,
        days=30,
        noise=5_000,
        base_rate=4.0,
        provider_multipliers=(0.35, 0.8, 1.5, 2.5, 5.0),
        cluster_sigma=0.5,
        cluster_target=48,
        flap_episodes_per_day=0.25,
        completed_log_fraction=0.04,
        other_log_fraction=0.3,
        price_factors=(1.06, 1.0, 1.0, 0.98, 0.97),
        price_change=(1, 15, 0.95),
    ),
    "scale": Scenario(
        name="scale",
        description="12,500 nodes (100,000 GPUs) for 1 day: volume and throughput",
        providers=4,
        nodes=12_500,
        days=1,
        noise=40_000,
        base_rate=4.0,
        provider_multipliers=(0.5, 1.0, 2.0, 3.0),
        cluster_target=1600,
        completed_log_fraction=0.05,
        other_log_fraction=0.3,
        warm_start=True,
    ),
}
