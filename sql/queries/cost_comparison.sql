-- name: cost_comparison
-- description: Pairs of providers (or clusters): the difference of their effective prices per useful GPU-hour (goodput where there are no prices) with its 95% interval, whether the data can tell them apart yet, how many more node-days it would take, and a plain-language statement.
-- param: level (provider|cluster, default: provider) compare providers or clusters
-- param: provider (text, default: NULL = every pair) only pairs that involve this provider
-- param: only_distinguishable (bool, default: false) only pairs whose interval excludes 0
SELECT level, a, b, measure, round(value_a, 4) AS value_a, round(value_b, 4) AS value_b,
       round(difference, 4) AS difference, round(ci_low, 4) AS ci_low, round(ci_high, 4) AS ci_high,
       distinguishable, round(more_node_days_needed) AS more_node_days_needed, statement
FROM provider_cost_comparison
WHERE level = coalesce(getvariable('level'), 'provider')
  AND (getvariable('provider') IS NULL
       OR getvariable('provider') IN (a, b)
       OR starts_with(a, getvariable('provider') || '/')
       OR starts_with(b, getvariable('provider') || '/'))
  AND (NOT coalesce(getvariable('only_distinguishable'), false) OR distinguishable)
ORDER BY distinguishable DESC, abs(difference) DESC NULLS LAST, a, b
