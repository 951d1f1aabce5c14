-- name: lost_work
-- description: Failed jobs by the GPU-hours their failure cost (docs/costs.md): the work since the last checkpoint save (or the whole run, an upper bound, without one), the restart until the resubmission printed progress, how each was measured, and the job's ETTR.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: domain (text, default: NULL = every domain) hardware, software, user, symptom or unknown
-- param: max_rows (int, default: 50) rows to return
SELECT job_id, provider, cluster, job_name, state, root_cause, domain, ended, gpus, checkpoint_at,
       round(lost_work_gpu_hours, 2) AS lost_work_gpu_hours, lost_work_method, resumed_by,
       round(restart_s) AS restart_s, round(restart_gpu_hours, 2) AS restart_gpu_hours, restart_method,
       round(lost_gpu_hours, 2) AS lost_gpu_hours, round(lost_gpu_hours_low, 2) AS lost_gpu_hours_low,
       round(lost_gpu_hours_high, 2) AS lost_gpu_hours_high, round(ettr, 4) AS ettr
FROM job_failures
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
  AND (getvariable('domain') IS NULL OR domain = getvariable('domain'))
ORDER BY lost_gpu_hours DESC NULLS LAST, ended, provider, cluster, job_id
LIMIT coalesce(getvariable('max_rows'), 50)
