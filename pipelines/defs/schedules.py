"""Nightly at 02:15 UTC: yesterday's partition of every cluster; at 03:45 the analytics.
Env ``FAULTLINE_INGEST_CRON`` / ``FAULTLINE_ANALYTICS_CRON`` (read when the code location
loads) move them: a deployment's own times, or a test's tick within the minute."""

import datetime as dt
import os

import dagster as dg

from ..ingest.landing import Partition, split_cluster_key
from .jobs import analytics_job, ingest_job
from .partitions import clusters, partition_key, register
from .resources import LandingResource

INGEST_CRON = os.environ.get("FAULTLINE_INGEST_CRON") or "15 2 * * *"
ANALYTICS_CRON = os.environ.get("FAULTLINE_ANALYTICS_CRON") or "45 3 * * *"


@dg.schedule(
    job=ingest_job,
    cron_schedule=INGEST_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def nightly_ingest(context: dg.ScheduleEvaluationContext, landing: LandingResource):
    """Every cluster seen in the landing folder or already known, for yesterday (UTC); a missing
    day folder still gets its (empty) partition. Schedules cannot return dynamic-partition
    requests, so the new keys are registered on the instance directly."""
    day = (context.scheduled_execution_time.astimezone(dt.timezone.utc) - dt.timedelta(days=1)).date()
    keys = {p.cluster_key for p in landing.discover().partitions}
    keys |= set(context.instance.get_dynamic_partitions(clusters.name))
    if not keys:
        return dg.SkipReason(f"no clusters in the landing folder {landing.root()}")
    parts = [Partition(*split_cluster_key(k), day.isoformat()) for k in sorted(keys)]
    register(context.instance, parts)
    return [dg.RunRequest(partition_key=partition_key(p), run_key=f"nightly:{p.relpath}") for p in parts]


@dg.schedule(
    job=analytics_job,
    cron_schedule=ANALYTICS_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def nightly_analytics(context: dg.ScheduleEvaluationContext):
    """After the night's partitions (02:15) have landed: recompute the analytics once a tick."""
    return dg.RunRequest(
        run_key=f"analytics:{context.scheduled_execution_time.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M}"
    )
