-- name: failure_causes_over_time
-- description: Failed jobs, GPU-hours lost and node incidents per taxonomy category and UTC day (or ISO week / month): how the mix of causes moves over time.
-- param: grain (day|week|month, default: day) period length (weeks start on Monday)
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
WITH f AS (
    SELECT CAST(date_trunc(coalesce(getvariable('grain'), 'day'), day) AS DATE) AS period,
           root_cause AS category, domain, count(*) AS failed_jobs, sum(gpu_hours_lost) AS gpu_hours_lost
    FROM counted_failed_jobs
    WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
    GROUP BY ALL
), i AS (
    SELECT CAST(date_trunc(coalesce(getvariable('grain'), 'day'), day) AS DATE) AS period,
           category, domain, count(*) AS incidents
    FROM counted_incidents
    WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
    GROUP BY ALL
)
SELECT coalesce(f.period, i.period) AS period, coalesce(f.category, i.category) AS category,
       coalesce(f.domain, i.domain) AS domain, coalesce(f.failed_jobs, 0) AS failed_jobs,
       round(coalesce(f.gpu_hours_lost, 0), 3) AS gpu_hours_lost, coalesce(i.incidents, 0) AS incidents
FROM f
FULL OUTER JOIN i ON f.period = i.period AND f.category = i.category
ORDER BY period, failed_jobs DESC, incidents DESC, category
