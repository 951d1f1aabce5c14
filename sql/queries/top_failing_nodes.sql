-- name: top_failing_nodes
-- description: Nodes ranked by node failures (node_failures: what the failure rate counts, incidents their rack does not share plus job interruptions), with their incidents (counted_incidents, of them shared by the rack), the infrastructure failures blamed on them, their rate per 1,000 node-days over every covered day (exact 95% interval, from rate_failures failures) next to their cluster's, and lemon status.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: days (int, default: NULL = every covered day) count only the last N days up to the latest day in the warehouse (the rate always covers every day)
-- param: max_rows (int, default: 20) rows to return
WITH since AS (
    SELECT CASE WHEN getvariable('days') IS NULL THEN DATE '0001-01-01'
                ELSE max(date) - (getvariable('days') - 1) END AS day
    FROM ingest_audit
), nf AS (
    SELECT provider, cluster, node, count(*) AS failures,
           count(*) FILTER (WHERE kind = 'interruption') AS interruptions
    FROM node_failures
    WHERE day >= (SELECT day FROM since)
    GROUP BY ALL
), per_cat AS (
    SELECT provider, cluster, node, category, count(*) AS n, count(*) FILTER (WHERE rack_shared) AS shared,
           max(first_ts) AS last_ts
    FROM counted_incidents
    WHERE day >= (SELECT day FROM since)
    GROUP BY ALL
), inc AS (  -- top_category: the most frequent (ties: the greater name, so the answer never varies)
    SELECT provider, cluster, node, CAST(sum(n) AS BIGINT) AS incidents, CAST(sum(shared) AS BIGINT) AS rack_incidents,
           arg_max(category, (n, category)) AS top_category, max(last_ts) AS last_incident
    FROM per_cat
    GROUP BY ALL
), fail AS (
    SELECT provider, cluster, culprit_node AS node, count(*) AS failed_jobs,
           sum(gpu_hours_lost) AS gpu_hours_lost
    FROM counted_failed_jobs
    WHERE culprit_node IS NOT NULL AND infrastructure AND day >= (SELECT day FROM since)
    GROUP BY ALL
), clusters AS (
    SELECT provider, cluster, rate_per_1k AS cluster_rate_per_1k
    FROM provider_scoreboard WHERE level = 'cluster'
), ranked AS (
    SELECT provider, cluster, node,
           coalesce(nf.failures, 0) AS failures,
           coalesce(inc.incidents, 0) AS incidents,
           coalesce(inc.rack_incidents, 0) AS rack_incidents,
           coalesce(nf.interruptions, 0) AS interruptions,
           coalesce(fail.failed_jobs, 0) AS failed_jobs,
           round(coalesce(fail.gpu_hours_lost, 0), 3) AS gpu_hours_lost,
           inc.top_category, inc.last_incident
    FROM nf
    FULL OUTER JOIN inc USING (provider, cluster, node)
    FULL OUTER JOIN fail USING (provider, cluster, node)
)
SELECT provider, cluster, h.rack, node, r.failures, r.incidents, r.rack_incidents, r.interruptions,
       r.failed_jobs, r.gpu_hours_lost, r.top_category, r.last_incident,
       h.node_days, h.failures AS rate_failures, round(h.rate_per_1k, 2) AS rate_per_1k,
       round(h.ci_low, 2) AS ci_low, round(h.ci_high, 2) AS ci_high,
       round(c.cluster_rate_per_1k, 2) AS cluster_rate_per_1k,
       l.node IS NOT NULL AS lemon, l.reason AS lemon_reason
FROM ranked AS r
LEFT JOIN node_health AS h USING (provider, cluster, node)
LEFT JOIN clusters AS c USING (provider, cluster)
LEFT JOIN (SELECT provider, cluster, node, string_agg(reason, '; ' ORDER BY reason) AS reason
           FROM lemon_nodes GROUP BY ALL) AS l USING (provider, cluster, node)
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
ORDER BY r.failures DESC, r.incidents DESC, r.failed_jobs DESC, r.gpu_hours_lost DESC, provider, cluster, node
LIMIT coalesce(getvariable('max_rows'), 20)
