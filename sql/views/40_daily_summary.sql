-- daily_summary: one row per covered (provider, cluster, UTC day): failed jobs (all, and
-- those with a hardware/software root cause), GPU-hours lost and node incidents. A day is
-- covered when the landing folder had a partition for it (ingest_audit), so quiet days
-- show zeros instead of going missing.
WITH days AS (
    SELECT DISTINCT provider, cluster, date AS day FROM ingest_audit
), fails AS (
    SELECT provider, cluster, CAST(timezone('UTC', ended) AS DATE) AS day,
           count(*) AS failed_jobs,
           count(*) FILTER (WHERE domain IN ('hardware', 'software')) AS infra_failed_jobs,
           sum(gpu_hours_lost) AS gpu_hours_lost
    FROM job_failures GROUP BY ALL
), incs AS (
    SELECT provider, cluster, CAST(timezone('UTC', first_ts) AS DATE) AS day,
           count(*) FILTER (WHERE severity IN ('error', 'critical')) AS incidents,
           count(DISTINCT node) FILTER (WHERE severity IN ('error', 'critical')) AS nodes_with_incidents
    FROM incidents GROUP BY ALL
)
SELECT d.provider, d.cluster, d.day,
       coalesce(f.failed_jobs, 0) AS failed_jobs,
       coalesce(f.infra_failed_jobs, 0) AS infra_failed_jobs,
       round(coalesce(f.gpu_hours_lost, 0), 3) AS gpu_hours_lost,
       coalesce(i.incidents, 0) AS incidents,
       coalesce(i.nodes_with_incidents, 0) AS nodes_with_incidents
FROM days AS d
LEFT JOIN fails AS f USING (provider, cluster, day)
LEFT JOIN incs AS i USING (provider, cluster, day)
