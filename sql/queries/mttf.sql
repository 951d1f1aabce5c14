-- name: mttf
-- description: Projected mean time to failure of a job of N GPUs on each provider and cluster, MTTF = 1 / (nodes x rate per node-hour), with the interval that the rate's exact 95% interval gives.
-- param: gpus (int, default: 1024) GPUs of the job (8 per node)
-- param: level (provider|cluster|all, default: all) which rows
SELECT level, provider, cluster, round(rate_per_1k, 2) AS rate_per_1k,
       coalesce(getvariable('gpus'), 1024) AS gpus,
       round(1.0 / (rate_per_1k / 1000.0 / 24.0 * coalesce(getvariable('gpus'), 1024) / 8.0), 1) AS mttf_hours,
       round(1.0 / (ci_high / 1000.0 / 24.0 * coalesce(getvariable('gpus'), 1024) / 8.0), 1) AS mttf_hours_low,
       CASE WHEN ci_low > 0 THEN round(1.0 / (ci_low / 1000.0 / 24.0 * coalesce(getvariable('gpus'), 1024) / 8.0), 1) END
           AS mttf_hours_high
FROM provider_scoreboard
WHERE rate_per_1k > 0
  AND (coalesce(getvariable('level'), 'all') = 'all' OR level = getvariable('level'))
ORDER BY level DESC, provider, cluster NULLS FIRST
