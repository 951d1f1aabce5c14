-- name: provider_costs
-- description: What failures cost each provider and cluster over the covered days (docs/costs.md): billed GPU-hours, GPU-hours lost to infrastructure and to user failures, drained node-days, goodput with its 95% interval, the price paid and the effective price per useful GPU-hour with its interval (dollar columns are null without prices.csv).
-- param: level (provider|cluster|all, default: provider) which rows
-- param: provider (text, default: NULL = every provider)
SELECT level, provider, cluster, n_nodes, round(node_days, 1) AS node_days, round(billed_gpu_hours) AS billed_gpu_hours,
       failed_jobs_infra, round(lost_gpu_hours_infra, 1) AS lost_gpu_hours_infra,
       round(lost_gpu_hours_user, 1) AS lost_gpu_hours_user, round(down_node_days, 2) AS down_node_days,
       round(goodput, 5) AS goodput, round(goodput_low, 5) AS goodput_low, round(goodput_high, 5) AS goodput_high,
       round(ettr, 4) AS ettr, round(usd_paid, 2) AS usd_paid, round(usd_per_gpu_hour, 4) AS usd_per_gpu_hour,
       round(usd_lost_infra, 2) AS usd_lost_infra, round(usd_lost_user, 2) AS usd_lost_user, round(usd_down, 2) AS usd_down,
       round(effective_usd_per_useful_gpu_hour, 4) AS effective_usd_per_useful_gpu_hour,
       round(effective_low, 4) AS effective_low, round(effective_high, 4) AS effective_high,
       round(usd_fleet_work_at_this_rate, 2) AS usd_fleet_work_at_this_rate
FROM provider_costs
WHERE (coalesce(getvariable('level'), 'provider') = 'all' OR level = coalesce(getvariable('level'), 'provider'))
  AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
ORDER BY level DESC, provider, cluster NULLS FIRST
