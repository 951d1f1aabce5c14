-- name: rack_days
-- description: Incidents (counted_incidents: severity error or critical) per rack and UTC day over the covered days, zeros included: the data behind the report's rack heatmaps.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: since (date, default: NULL = first covered day)
-- param: until (date, default: NULL = last covered day)
WITH days AS (
    SELECT DISTINCT provider, cluster, date AS day FROM ingest_audit
    WHERE (getvariable('since') IS NULL OR date >= getvariable('since'))
      AND (getvariable('until') IS NULL OR date <= getvariable('until'))
), racks AS (
    SELECT provider, cluster, rack, count(*) AS n_nodes FROM inventory_latest
    WHERE rack IS NOT NULL GROUP BY ALL
), serious AS (
    SELECT provider, cluster, rack, node, category, day FROM counted_incidents WHERE rack IS NOT NULL
), cats AS (  -- the most frequent category (ties: the greater name, so the answer never varies)
    SELECT provider, cluster, rack, day, arg_max(category, (n, category)) AS top_category
    FROM (SELECT provider, cluster, rack, day, category, count(*) AS n FROM serious GROUP BY ALL)
    GROUP BY ALL
), inc AS (
    SELECT provider, cluster, rack, day, count(*) AS incidents, count(DISTINCT node) AS nodes,
           any_value(c.top_category) AS top_category
    FROM serious
    JOIN cats AS c USING (provider, cluster, rack, day)
    GROUP BY ALL
)
SELECT provider, cluster, rack, r.n_nodes, day, coalesce(i.incidents, 0) AS incidents,
       coalesce(i.nodes, 0) AS nodes, i.top_category
FROM racks AS r
JOIN days USING (provider, cluster)
LEFT JOIN inc AS i USING (provider, cluster, rack, day)
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
ORDER BY provider, cluster, rack, day
