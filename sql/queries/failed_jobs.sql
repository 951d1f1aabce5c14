-- name: failed_jobs
-- description: Jobs that failed (counted_failed_jobs: did not complete) on one UTC day, whether each is an infrastructure failure, the most GPU-hours lost first, with root cause, culprit, confidence, the deciding evidence, the rule or model that decided, the recommended action and the known issue that covers it.
-- param: day (date, default: NULL = latest day in the warehouse) UTC day of the job's end
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: max_rows (int, default: 200) rows to return
SELECT job_id, provider, cluster, job_name, user, state, started, ended, nodes, gpus, gpu_hours_lost,
       root_cause, domain, infrastructure, culprit_node, culprit_gpu, confidence, evidence, action, decided_by,
       node_list, known_issue_id
FROM counted_failed_jobs
WHERE day = coalesce(getvariable('day'), (SELECT max(date) FROM ingest_audit))
  AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
ORDER BY gpu_hours_lost DESC NULLS LAST, ended, provider, cluster, job_id
LIMIT coalesce(getvariable('max_rows'), 200)
