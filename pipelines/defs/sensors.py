"""Run the partitions whose landing files appeared or changed since the last tick. The cursor
maps each partition to a digest of its files' sizes and mtimes; a change of ``inventory.csv``
reruns the latest day of every cluster."""

import hashlib
import json
import os

import dagster as dg

from ..ingest.landing import Partition
from .jobs import ingest_job
from .partitions import clusters, dates, partition_key
from .resources import LandingResource

INVENTORY = "inventory.csv"
#: seconds between ticks at least (env ``FAULTLINE_SENSOR_INTERVAL_S``, read when the code location loads)
INTERVAL_S = int(os.environ.get("FAULTLINE_SENSOR_INTERVAL_S") or 120)


def digest(files: dict[str, list[int]]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def changed_partitions(landing: LandingResource, cursor: dict[str, str]) -> tuple[list[Partition], dict[str, str]]:
    """Partitions to run and the new cursor."""
    found = landing.discover().partitions
    now = {p.relpath: digest(landing.fingerprint(p)) for p in found}
    inv = landing.root() / INVENTORY
    if inv.is_file():
        st = inv.stat()
        now[INVENTORY] = digest({INVENTORY: [st.st_size, st.st_mtime_ns]})
    todo = {p for p in found if cursor.get(p.relpath) != now[p.relpath]}
    if INVENTORY in cursor and cursor.get(INVENTORY) != now.get(INVENTORY):
        latest: dict[tuple[str, str], Partition] = {}
        for p in found:
            latest[(p.provider, p.cluster)] = max(p, latest.get((p.provider, p.cluster), p))
        todo |= set(latest.values())
    return sorted(todo), now


@dg.sensor(job=ingest_job, minimum_interval_seconds=INTERVAL_S)
def landing_sensor(context: dg.SensorEvaluationContext, landing: LandingResource) -> dg.SensorResult:
    todo, now = changed_partitions(landing, json.loads(context.cursor) if context.cursor else {})
    known_dates = set(context.instance.get_dynamic_partitions(dates.name))
    known_clusters = set(context.instance.get_dynamic_partitions(clusters.name))
    new_dates = sorted({p.date for p in todo} - known_dates)
    new_clusters = sorted({p.cluster_key for p in todo} - known_clusters)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=partition_key(p), run_key=f"{p.relpath}@{now[p.relpath]}") for p in todo
        ],
        dynamic_partitions_requests=[
            r
            for r in (
                dates.build_add_request(new_dates) if new_dates else None,
                clusters.build_add_request(new_clusters) if new_clusters else None,
            )
            if r is not None
        ],
        cursor=json.dumps(now, sort_keys=True),
    )
