-- name: node_timeline
-- description: Everything that happened on one node, in time order (UTC): its log events, the incidents they formed, and the jobs that ended on it with their verdicts.
-- param: node (text, required) node name as in the inventory
-- param: provider (text, default: NULL = any provider)
-- param: cluster (text, default: NULL = any cluster)
-- param: since (date, default: NULL = first covered day) first UTC day shown
-- param: until (date, default: NULL = last covered day) last UTC day shown
-- param: include_benign (bool, default: false) also show benign lines (boot, NCCL INFO, ...)
-- param: max_rows (int, default: 500) rows to return
WITH ev AS (
    SELECT ts, 'event' AS kind, provider, cluster, category, severity, job_id,
           split_part(raw, chr(10), 1) AS detail, event_id AS ref
    FROM events
    WHERE node = getvariable('node')
      AND (coalesce(getvariable('include_benign'), false) OR category <> 'benign')
), inc AS (
    SELECT first_ts AS ts, 'incident' AS kind, provider, cluster, category, severity, NULL AS job_id,
           format('{} event(s) in {} burst(s) until {}; action {}: {}', n_events, n_bursts,
                  strftime(timezone('UTC', last_ts), '%Y-%m-%dT%H:%M:%SZ'), action,
                  split_part(sample, chr(10), 1)) AS detail,
           incident_id AS ref
    FROM incidents
    WHERE node = getvariable('node')
), jb AS (
    SELECT j."end" AS ts, 'job_end' AS kind, j.provider, j.cluster,
           coalesce(f.root_cause, CASE WHEN j.state = 'COMPLETED' THEN 'benign' END) AS category,
           CASE WHEN f.job_id IS NULL THEN 'info' WHEN f.culprit_node = getvariable('node') THEN 'error'
                ELSE 'warning' END AS severity,
           j.job_id,
           format('job {} ({}, {}) {} on {}{}', j.job_id, j.job_name, j.user, j.state, j.nodelist,
                  CASE WHEN f.job_id IS NULL THEN ''
                       ELSE format('; root cause {} (culprit {}, confidence {})', f.root_cause,
                                   coalesce(f.culprit_node, '?'), round(f.confidence, 2)) END) AS detail,
           j.provider || '/' || j.cluster || '/' || j.job_id AS ref
    FROM (SELECT * FROM jobs
          QUALIFY row_number() OVER (PARTITION BY provider, cluster, job_id ORDER BY date DESC) = 1) AS j
    LEFT JOIN job_failures AS f USING (provider, cluster, job_id)
    WHERE list_contains(j.nodes, getvariable('node')) AND j."end" IS NOT NULL
)
SELECT ts, kind, provider, cluster, category, severity, job_id, detail, ref
FROM (SELECT * FROM ev UNION ALL SELECT * FROM inc UNION ALL SELECT * FROM jb) AS t
WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
  AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
  AND (getvariable('since') IS NULL OR CAST(timezone('UTC', ts) AS DATE) >= getvariable('since'))
  AND (getvariable('until') IS NULL OR CAST(timezone('UTC', ts) AS DATE) <= getvariable('until'))
ORDER BY ts NULLS LAST, kind, ref
LIMIT coalesce(getvariable('max_rows'), 500)
