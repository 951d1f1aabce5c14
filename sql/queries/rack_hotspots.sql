-- name: rack_hotspots
-- description: Racks ranked by failure rate per 1,000 node-days (exact 95% interval) next to their cluster's rate; racks flagged as hotspots (more incidents than the rest of the cluster, Benjamini-Hochberg corrected, or nodes failing together) come first, with the reason and the recommended action.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: only_hotspots (bool, default: false) only the flagged racks
-- param: max_rows (int, default: 20) rows to return
WITH clusters AS (
    SELECT provider, cluster, rate_per_1k AS cluster_rate_per_1k
    FROM provider_scoreboard WHERE level = 'cluster'
)
SELECT provider, cluster, rack, r.n_nodes, r.node_days, r.incidents,
       round(r.rate_per_1k, 2) AS rate_per_1k, round(r.ci_low, 2) AS ci_low, round(r.ci_high, 2) AS ci_high,
       round(c.cluster_rate_per_1k, 2) AS cluster_rate_per_1k,
       r.failed_jobs, round(r.gpu_hours_lost, 3) AS gpu_hours_lost,
       h.rack IS NOT NULL AS hotspot, h.tested_incidents, round(h.expected, 2) AS expected, h.p_value,
       h.correlated_incidents, h.correlated_category, h.max_nodes_together, h.flagged_by, h.reason, h.action
FROM rack_health AS r
LEFT JOIN rack_hotspots AS h USING (provider, cluster, rack)
LEFT JOIN clusters AS c USING (provider, cluster)
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
  AND (NOT coalesce(getvariable('only_hotspots'), false) OR h.rack IS NOT NULL)
ORDER BY hotspot DESC, h.p_value NULLS LAST, r.rate_per_1k DESC, provider, cluster, rack
LIMIT coalesce(getvariable('max_rows'), 20)
