"""The one partitions definition of the pipeline: landing day x cluster, both dynamic (keys found
in the landing folder). A time window would reject days the clock has not reached (simulated
landings); a static list would freeze the landing folder seen at import time."""

import warnings

import dagster as dg

from ..ingest.landing import Partition, cluster_key, split_cluster_key

dates = dg.DynamicPartitionsDefinition(name="faultline_date")
clusters = dg.DynamicPartitionsDefinition(name="faultline_cluster")
landing_partitions = dg.MultiPartitionsDefinition({"date": dates, "cluster": clusters})


def partition_key(part: Partition) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": part.date, "cluster": cluster_key(part.provider, part.cluster)})


#: UI backfills run up to a month of one cluster per run (a run's bookkeeping costs about as
#: much as parsing a small partition, so one run per partition would double a backfill)
BATCH = dg.BackfillPolicy.multi_run(max_partitions_per_run=31)
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)


def _partition(key: str | dg.MultiPartitionKey) -> Partition:
    if not isinstance(key, dg.MultiPartitionKey):
        key = landing_partitions.get_partition_key_from_str(key)
    dims = key.keys_by_dimension
    return Partition(*split_cluster_key(dims["cluster"]), dims["date"])


def partitions_of(context) -> list[Partition]:
    """Every partition of the run: one for the schedule and the sensor, a range of one
    cluster's days for backfills and ``faultline run``."""
    return [_partition(k) for k in context.partition_keys]


def key_orders(instance: dg.DagsterInstance) -> tuple[list[str], list[str]]:
    """The instance's order of date keys and of cluster keys (a range follows it)."""
    return instance.get_dynamic_partitions(dates.name), instance.get_dynamic_partitions(clusters.name)


def range_tags(run: list[Partition]) -> dict[str, str]:
    """Run tags that make one Dagster run materialize ``run`` (a rectangle: ``launch.plan.ranges``)."""
    return {
        "dagster/asset_partition_range_start": str(partition_key(run[0])),
        "dagster/asset_partition_range_end": str(partition_key(run[-1])),
    }


def register(instance: dg.DagsterInstance, parts: list[Partition]) -> None:
    """Add the date and cluster keys of ``parts`` that the instance does not know yet."""
    for pdef, keys in ((dates, {p.date for p in parts}), (clusters, {p.cluster_key for p in parts})):
        new = sorted(keys - set(instance.get_dynamic_partitions(pdef.name)))
        if new:
            instance.add_dynamic_partitions(pdef.name, new)
