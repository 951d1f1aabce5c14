-- daily_summary: one row per covered (provider, cluster, UTC day): failed jobs (all, and the
-- infrastructure ones: counted_failed_jobs), GPU-hours lost, incidents (counted_incidents)
-- and node failures (node_failures, what the rates count). A day is covered when the landing
-- folder had a partition for it (ingest_audit), so quiet days show zeros instead of going missing.
WITH days AS (
    SELECT DISTINCT provider, cluster, date AS day FROM ingest_audit
), fails AS (
    SELECT provider, cluster, day, count(*) AS failed_jobs,
           count(*) FILTER (WHERE infrastructure) AS infra_failed_jobs,
           sum(gpu_hours_lost) AS gpu_hours_lost
    FROM counted_failed_jobs GROUP BY ALL
), incs AS (
    SELECT provider, cluster, day, count(*) AS incidents, count(DISTINCT node) AS nodes_with_incidents
    FROM counted_incidents GROUP BY ALL
), nf AS (
    SELECT provider, cluster, day, count(*) AS node_failures FROM node_failures GROUP BY ALL
)
SELECT d.provider, d.cluster, d.day,
       coalesce(f.failed_jobs, 0) AS failed_jobs,
       coalesce(f.infra_failed_jobs, 0) AS infra_failed_jobs,
       round(coalesce(f.gpu_hours_lost, 0), 3) AS gpu_hours_lost,
       coalesce(i.incidents, 0) AS incidents,
       coalesce(i.nodes_with_incidents, 0) AS nodes_with_incidents,
       coalesce(n.node_failures, 0) AS node_failures
FROM days AS d
LEFT JOIN fails AS f USING (provider, cluster, day)
LEFT JOIN incs AS i USING (provider, cluster, day)
LEFT JOIN nf AS n USING (provider, cluster, day)
