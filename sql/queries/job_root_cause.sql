-- name: job_root_cause
-- description: One failed job's verdict: root cause, domain, culprit node and GPU, confidence, the deciding evidence line, the rule or model that decided, the recommended action, and what else its own output complained about.
-- param: job_id (text, required) Slurm job id as sacct prints it
-- param: provider (text, default: NULL = any provider) disambiguates a job id seen in several clusters
-- param: cluster (text, default: NULL = any cluster)
SELECT f.job_id, f.provider, f.cluster, f.job_name, f.user, f.state, j.exit_code, j.signal, j.reason,
       f.started, f.ended, f.nodes, f.gpus, f.gpu_hours_lost, f.node_list,
       f.root_cause, f.domain, f.culprit_node, f.culprit_gpu, f.confidence, f.decided_by, f.action,
       f.evidence, j.fr_suspect_rank, j.fr_suspect_reason,
       (SELECT list(DISTINCT e.category ORDER BY e.category)
          FROM events AS e
         WHERE e.job_id = f.job_id AND e.provider = f.provider AND e.cluster = f.cluster
           AND e.category NOT IN ('benign')) AS job_log_categories
FROM job_failures AS f
LEFT JOIN (
    -- the job's latest sacct row; a join on its max(date), not QUALIFY row_number() = 1, which
    -- the DuckDB 1.5 shell's optimizer answers with NULLs here (tests/system/test_duckdb_cli.py)
    SELECT jobs.* FROM jobs
    JOIN (SELECT provider, cluster, job_id, max(date) AS date FROM jobs
          WHERE job_id = getvariable('job_id') GROUP BY ALL) AS latest USING (provider, cluster, job_id, date)
) AS j USING (provider, cluster, job_id)
WHERE f.job_id = getvariable('job_id')
  AND (getvariable('provider') IS NULL OR f.provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR f.cluster = getvariable('cluster'))
ORDER BY f.ended DESC, f.provider, f.cluster
