-- name: top_failing_nodes
-- description: Nodes ranked by node incidents (hardware/software faults, severity error or critical) and by the failed jobs they were blamed for, with their failure rate per 1,000 node-days (exact 95% interval, whole warehouse) next to their cluster's, and lemon status.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: days (int, default: NULL = every covered day) count only the last N days up to the latest day in the warehouse
-- param: max_rows (int, default: 20) rows to return
WITH since AS (
    SELECT CASE WHEN getvariable('days') IS NULL THEN DATE '0001-01-01'
                ELSE max(date) - (getvariable('days') - 1) END AS day
    FROM ingest_audit
), per_cat AS (
    SELECT provider, cluster, node, category, count(*) AS n, max(first_ts) AS last_ts
    FROM incidents
    WHERE severity IN ('error', 'critical')
      AND CAST(timezone('UTC', first_ts) AS DATE) >= (SELECT day FROM since)
      AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
    GROUP BY ALL
), inc AS (  -- top_category: the most frequent (ties: the greater name, so the answer never varies)
    SELECT provider, cluster, node, sum(n) AS incidents, arg_max(category, (n, category)) AS top_category,
           max(last_ts) AS last_incident
    FROM per_cat
    GROUP BY ALL
), fail AS (
    SELECT provider, cluster, culprit_node AS node, count(*) AS failed_jobs,
           sum(gpu_hours_lost) AS gpu_hours_lost
    FROM job_failures
    WHERE culprit_node IS NOT NULL AND domain IN ('hardware', 'software')
      AND CAST(timezone('UTC', ended) AS DATE) >= (SELECT day FROM since)
      AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
    GROUP BY ALL
), clusters AS (
    SELECT provider, cluster, rate_per_1k AS cluster_rate_per_1k
    FROM provider_scoreboard WHERE level = 'cluster'
)
SELECT provider, cluster, h.rack, node,
       coalesce(inc.incidents, 0) AS incidents,
       coalesce(fail.failed_jobs, 0) AS failed_jobs,
       round(coalesce(fail.gpu_hours_lost, 0), 3) AS gpu_hours_lost,
       inc.top_category, inc.last_incident,
       h.node_days, round(h.rate_per_1k, 2) AS rate_per_1k, round(h.ci_low, 2) AS ci_low,
       round(h.ci_high, 2) AS ci_high, round(c.cluster_rate_per_1k, 2) AS cluster_rate_per_1k,
       l.node IS NOT NULL AS lemon, l.reason AS lemon_reason
FROM inc
FULL OUTER JOIN fail USING (provider, cluster, node)
LEFT JOIN node_health AS h USING (provider, cluster, node)
LEFT JOIN clusters AS c USING (provider, cluster)
LEFT JOIN lemon_nodes AS l USING (provider, cluster, node)
ORDER BY incidents DESC, failed_jobs DESC, gpu_hours_lost DESC, provider, cluster, node
LIMIT coalesce(getvariable('max_rows'), 20)
