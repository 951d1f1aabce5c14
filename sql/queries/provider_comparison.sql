-- name: provider_comparison
-- description: Pairwise failure-rate ratios between providers (or clusters) with exact 95% intervals, whether the data can tell the two apart yet, how many more node-days it would take, and a plain-language statement.
-- param: level (provider|cluster, default: provider) compare providers or clusters
-- param: provider (text, default: NULL = every pair) only pairs that involve this provider
-- param: only_distinguishable (bool, default: false) only pairs whose interval excludes 1
SELECT level, a, b, round(rate_a_per_1k, 2) AS rate_a_per_1k, round(rate_b_per_1k, 2) AS rate_b_per_1k,
       round(ratio, 3) AS ratio, round(ci_low, 3) AS ci_low, round(ci_high, 3) AS ci_high,
       distinguishable, round(more_node_days_needed) AS more_node_days_needed, statement
FROM provider_comparison
WHERE level = coalesce(getvariable('level'), 'provider')
  AND (getvariable('provider') IS NULL
       OR getvariable('provider') IN (a, b)
       OR starts_with(a, getvariable('provider') || '/')
       OR starts_with(b, getvariable('provider') || '/'))
  AND (NOT coalesce(getvariable('only_distinguishable'), false) OR distinguishable)
ORDER BY distinguishable DESC, greatest(ratio, 1 / nullif(ratio, 0)) DESC NULLS LAST, a, b
