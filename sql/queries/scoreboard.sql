-- name: scoreboard
-- description: The provider and cluster scoreboard: node failures (node_failures: incidents their rack does not share, and interrupted jobs) per 1,000 node-days with exact 95% intervals, failed jobs, infrastructure GPU-hours lost and the projected mean time to failure of a 1,024-GPU job.
-- param: level (provider|cluster|all, default: all) which rows
-- param: provider (text, default: NULL = every provider)
SELECT level, provider, cluster, n_nodes, node_days, round(gpu_hours) AS gpu_hours, failures, incidents, interruptions,
       round(rate_per_1k, 2) AS rate_per_1k, round(ci_low, 2) AS ci_low, round(ci_high, 2) AS ci_high,
       failed_jobs_all, infra_failed_jobs, round(infra_gpu_hours_lost, 3) AS infra_gpu_hours_lost,
       round(infra_gpu_hours_lost_per_1k_gpu_hours, 3) AS infra_gpu_hours_lost_per_1k_gpu_hours,
       round(mttf_hours_1024_gpus, 1) AS mttf_hours_1024_gpus
FROM provider_scoreboard
WHERE (coalesce(getvariable('level'), 'all') = 'all' OR level = getvariable('level'))
  AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
ORDER BY level DESC, provider, cluster NULLS FIRST
