"""The one partitions definition of the pipeline: landing day x cluster.

Both dimensions are dynamic: their keys are the dates and clusters found in the landing
folder, registered by the landing sensor, the nightly schedule and ``faultline run``. A
time-window dimension would reject days the clock has not reached (simulated landings) and
need a start date; a static list would freeze the landing folder seen at import time.
"""
import dagster as dg

from ..landing import Partition, cluster_key, split_cluster_key

dates = dg.DynamicPartitionsDefinition(name="faultline_date")
clusters = dg.DynamicPartitionsDefinition(name="faultline_cluster")
landing_partitions = dg.MultiPartitionsDefinition({"date": dates, "cluster": clusters})


def partition_key(part: Partition) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": part.date, "cluster": cluster_key(part.provider, part.cluster)})


def partition_of(context) -> Partition:
    keys = context.partition_key.keys_by_dimension
    return Partition(*split_cluster_key(keys["cluster"]), keys["date"])


def register(instance: dg.DagsterInstance, parts: list[Partition]) -> None:
    """Add the date and cluster keys of ``parts`` that the instance does not know yet."""
    for pdef, keys in ((dates, {p.date for p in parts}), (clusters, {p.cluster_key for p in parts})):
        new = sorted(keys - set(instance.get_dynamic_partitions(pdef.name)))
        if new:
            instance.add_dynamic_partitions(pdef.name, new)
