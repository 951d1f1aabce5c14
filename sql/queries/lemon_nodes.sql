-- name: lemon_nodes
-- description: Lemon nodes: nodes that fail more than the rest of their cluster (leave-one-out Poisson test, Benjamini-Hochberg corrected) or whose one GPU keeps raising "user" Xids across jobs; with their rate and 95% interval next to the cluster's, the evidence and the recommended action.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: max_rows (int, default: 50) rows to return
WITH clusters AS (
    SELECT provider, cluster, rate_per_1k AS cluster_rate_per_1k
    FROM provider_scoreboard WHERE level = 'cluster'
)
SELECT provider, cluster, l.rack, node, l.node_days, l.incidents, round(l.expected, 2) AS expected,
       l.p_value, round(h.rate_per_1k, 2) AS rate_per_1k, round(h.ci_low, 2) AS ci_low,
       round(h.ci_high, 2) AS ci_high, round(c.cluster_rate_per_1k, 2) AS cluster_rate_per_1k,
       l.top_category, l.failed_jobs, round(l.gpu_hours_lost, 3) AS gpu_hours_lost,
       l.evidence_kind, l.reason, l.action
FROM lemon_nodes AS l
LEFT JOIN node_health AS h USING (provider, cluster, node)
LEFT JOIN clusters AS c USING (provider, cluster)
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
ORDER BY l.p_value NULLS LAST, l.incidents DESC, provider, cluster, node
LIMIT coalesce(getvariable('max_rows'), 50)
