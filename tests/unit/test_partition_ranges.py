"""Range runs: which partitions one Dagster run materializes (``launch.plan``) and that a
range run writes exactly those partitions."""

from __future__ import annotations

import dagster as dg
import pytest

from faultline.defs.partitions import key_orders, landing_partitions, range_tags, register
from faultline.ingest.landing import Partition
from faultline.launch import plan as run_plan
from faultline.launch.local import batches


def parts(spec: dict[str, list[int]]) -> list[Partition]:
    return [Partition(*key.split(":"), f"2026-11-{d:02d}") for key, days in spec.items() for d in days]


def partition_ranges(instance, ps, max_parts):
    """Rectangles of at most ``max_parts`` in the instance's order of keys."""
    return run_plan.ranges(ps, max_parts, max_parts, *key_orders(instance))


def relpaths(runs):
    return [[p.relpath for p in run] for run in runs]


@pytest.fixture
def instance():
    return dg.DagsterInstance.ephemeral()


def test_one_cluster_consecutive_days_share_a_run_gaps_split_it(instance):
    ps = parts({"p:a": [1, 2, 3, 5, 6]})
    register(instance, ps + parts({"p:a": [4]}))  # day 4 exists but is not selected
    runs = partition_ranges(instance, ps, 64)
    assert relpaths(runs) == [
        ["p/a/2026-11-01", "p/a/2026-11-02", "p/a/2026-11-03"],
        ["p/a/2026-11-05", "p/a/2026-11-06"],
    ]


def test_clusters_with_the_same_days_form_one_rectangle_within_the_cap(instance):
    ps = parts({"p:a": [1, 2], "p:b": [1, 2], "p:c": [1, 2], "q:d": [2]})
    register(instance, ps)
    assert relpaths(partition_ranges(instance, ps, 64)) == [
        ["p/a/2026-11-01", "p/a/2026-11-02", "p/b/2026-11-01", "p/b/2026-11-02", "p/c/2026-11-01", "p/c/2026-11-02"],
        ["q/d/2026-11-02"],
    ]
    assert [len(r) for r in partition_ranges(instance, ps, 4)] == [4, 2, 1]
    assert [len(r) for r in partition_ranges(instance, ps, 1)] == [1] * 7


def test_every_range_is_exactly_what_dagster_expands_it_to(instance):
    ps = parts({"p:a": [1, 2, 3, 4], "p:b": [2, 3], "p:c": [2, 3], "q:d": [1, 3, 4], "q:e": [1, 3, 4]})
    register(instance, ps)
    runs = partition_ranges(instance, ps, 5)
    assert sorted(p.relpath for run in runs for p in run) == sorted(p.relpath for p in ps)
    for run in runs:
        tags = range_tags(run)
        keys = landing_partitions.get_partition_keys_in_range(
            dg.PartitionKeyRange(
                tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]
            ),
            dynamic_partitions_store=instance,
        )
        assert sorted(map(str, keys)) == sorted(f"{p.cluster_key}|{p.date}" for p in run)


def test_batches_give_every_worker_a_share():
    ps = parts({f"p:c{i}": list(range(1, 8)) for i in range(7)})
    assert [len(r) for r in batches(ps, 1)] == [49]
    # 5 clusters x 5 days; 2 clusters x 7 days + 5 clusters x 2 days: 25 + 24 (one worker
    # taking whole clusters would do 28 while the other does 21)
    assert [len(r) for r in batches(ps, 2)] == [25, 14, 10]
    assert [len(r) for r in batches(ps, 8)] == [7] * 7


@pytest.mark.parametrize("workers", [2, 3, 4, 5])
def test_a_plan_covers_every_partition_once_in_rectangles_and_beats_whole_clusters(workers, instance):
    ps = parts(
        {
            "p:a": [1, 2, 3, 4, 5, 6],
            "p:b": [1, 2, 3, 4, 5, 6],
            "p:c": [2, 3, 4, 5],
            "q:d": [1, 3, 4, 5, 6, 7],
            "q:e": list(range(1, 12)),
        }
    )
    register(instance, ps)
    runs = batches(ps, workers, instance)
    assert sorted(p.relpath for run in runs for p in run) == sorted(p.relpath for p in ps)
    assert [len(r) for r in runs] == sorted((len(r) for r in runs), reverse=True)
    for run in runs:  # each run is exactly the range Dagster expands its tags to
        tags = range_tags(run)
        keys = landing_partitions.get_partition_keys_in_range(
            dg.PartitionKeyRange(
                tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]
            ),
            dynamic_partitions_store=instance,
        )
        assert sorted(map(str, keys)) == sorted(f"{p.cluster_key}|{p.date}" for p in run)
    whole = partition_ranges(instance, ps, -(-len(ps) // workers))
    assert run_plan.makespan([len(r) for r in runs], workers) <= run_plan.makespan([len(r) for r in whole], workers)


def test_makespan_is_the_pool_taking_runs_largest_first():
    from faultline.launch.plan import makespan

    assert makespan([21, 21, 7], 2, run_cost=0) == 28
    assert makespan([25, 14, 10], 2, run_cost=0) == 25
    assert makespan([3, 3, 3], 2, run_cost=1) == 8
    assert makespan([5], 4, run_cost=1) == 6


def test_a_range_run_writes_what_single_partition_runs_write(landing, tmp_path):
    from helpers.hashes import lake_hashes

    from faultline.defs.jobs import INGEST_ASSETS, INGEST_CHECKS
    from faultline.defs.partitions import partition_key
    from faultline.defs.resources import LakeResource, LandingResource
    from faultline.launch.local import QUIET, run_pipeline

    ranged, single = tmp_path / "ranged", tmp_path / "single"
    run_pipeline(landing, ranged, analytics=False, workers=1)
    inst = dg.DagsterInstance.ephemeral()
    ps = [
        Partition("bluepeak", "west-2", "2026-11-24"),
        Partition("northwind", "c1", "2026-11-24"),
        Partition("northwind", "c1", "2026-11-25"),
    ]
    register(inst, ps)
    res = {"landing": LandingResource(path=str(landing)), "lake": LakeResource(warehouse=str(single))}
    for p in ps:
        r = dg.materialize(
            [*INGEST_ASSETS, *INGEST_CHECKS],
            partition_key=partition_key(p),
            resources=res,
            instance=inst,
            run_config=QUIET,
        )
        assert r.success
    assert lake_hashes(ranged) == lake_hashes(single)

    # one range run over both days of northwind/c1: a materialization per partition, and
    # checks that passed for the range
    r = dg.materialize(
        [*INGEST_ASSETS, *INGEST_CHECKS], resources=res, instance=inst, run_config=QUIET, tags=range_tags(ps[1:])
    )
    assert r.success
    mats = {(m.asset_key.to_user_string(), m.partition) for m in r.get_asset_materialization_events()}
    assert {p for k, p in mats if k == "core_events"} == {"northwind:c1|2026-11-24", "northwind:c1|2026-11-25"}
    assert all(e.passed for e in r.get_asset_check_evaluations())
    assert lake_hashes(single) == lake_hashes(ranged)
