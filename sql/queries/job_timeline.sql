-- name: job_timeline
-- description: Postmortem timeline (UTC) of failed jobs: start and end, the job's own non-benign log lines, and the kernel and scheduler lines on its nodes from before_s before to after_s after its end (the attribution window). The same message template on the same node is folded into one line with a count; `deciding` marks the line the verdict rests on.
-- param: job_id (text, default: NULL = the failed jobs that ended on `day`, as failed_jobs lists them)
-- param: day (date, default: NULL = latest day in the warehouse) used when job_id is NULL
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: max_jobs (int, default: 200) when job_id is NULL: the jobs that lost the most GPU-hours
-- param: before_s (int, default: 1800) seconds before the job's end to look at its nodes
-- param: after_s (int, default: 300) seconds after the job's end to look at its nodes
-- param: max_lines (int, default: 40) lines per job (markers and the deciding line are kept first)
WITH f AS (
    SELECT * FROM counted_failed_jobs
    WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
      AND CASE WHEN getvariable('job_id') IS NOT NULL THEN job_id = getvariable('job_id')
               ELSE day = coalesce(getvariable('day'), (SELECT max(date) FROM ingest_audit)) END
    QUALIFY row_number() OVER (ORDER BY gpu_hours_lost DESC NULLS LAST, ended, provider, cluster, job_id)
            <= coalesce(getvariable('max_jobs'), 200)
), j AS (
    SELECT provider, cluster, job_id, nodes FROM jobs
    WHERE job_id IN (SELECT job_id FROM f)
    QUALIFY row_number() OVER (PARTITION BY provider, cluster, job_id ORDER BY date DESC) = 1
), job_nodes AS (
    SELECT provider, cluster, job_id, unnest(nodes) AS node FROM j
), own AS (
    SELECT f.provider, f.cluster, f.job_id, 'job' AS origin, e.node, e.ts, e.category, e.severity,
           e.rule_id, e.template, split_part(e.raw, chr(10), 1) AS line, e.source, e.line_no,
           coalesce(e.repeats, 1) AS repeats, coalesce(e.last_ts, e.ts) AS until
    FROM f JOIN events AS e
      ON e.provider = f.provider AND e.cluster = f.cluster AND e.job_id = f.job_id
    WHERE e.category <> 'benign'
), near AS (
    SELECT f.provider, f.cluster, f.job_id, 'node' AS origin, e.node, e.ts, e.category, e.severity,
           e.rule_id, e.template, split_part(e.raw, chr(10), 1) AS line, e.source, e.line_no,
           coalesce(e.repeats, 1) AS repeats, coalesce(e.last_ts, e.ts) AS until
    FROM f
    JOIN job_nodes AS n USING (provider, cluster, job_id)
    JOIN events AS e ON e.provider = n.provider AND e.cluster = n.cluster AND e.node = n.node
    WHERE e.job_id IS NULL AND e.category <> 'benign'
      AND e.ts BETWEEN f.ended - to_seconds(coalesce(getvariable('before_s'), 1800))
                   AND f.ended + to_seconds(coalesce(getvariable('after_s'), 300))
), folded AS (
    SELECT provider, cluster, job_id, origin, node, min(ts) AS ts, max(until) AS last_ts, sum(repeats) AS count,
           arg_min(category, (ts, source, line_no)) AS category,
           arg_max(severity, CASE severity WHEN 'critical' THEN 3 WHEN 'error' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END) AS severity,
           arg_min(rule_id, (ts, source, line_no)) AS rule_id,
           arg_min(line, (ts, source, line_no)) AS line, arg_min(source || ':' || line_no, (ts, source, line_no)) AS ref
    FROM (SELECT * FROM own UNION ALL SELECT * FROM near)
    GROUP BY provider, cluster, job_id, origin, node, coalesce(template, line)
), marks AS (
    SELECT provider, cluster, job_id, 'scheduler' AS origin, NULL AS node, started AS ts, started AS last_ts,
           1 AS count, 'benign' AS category, 'info' AS severity, 'sacct' AS rule_id,
           format('job {} started on {} ({} node(s), {} GPU(s))', job_id, node_list, nodes, gpus) AS line,
           'sacct' AS ref
    FROM f
    UNION ALL
    SELECT provider, cluster, job_id, 'scheduler', NULL, ended, ended, 1, root_cause,
           CASE WHEN infrastructure THEN 'critical' ELSE 'error' END, 'sacct',
           format('job {} ended {}: {:.1f} GPU-hours lost', job_id, state, gpu_hours_lost), 'sacct'
    FROM f
), lines AS (
    SELECT t.*,
           t.origin <> 'scheduler' AND f.evidence IS NOT NULL
             AND strpos(f.evidence, left(t.line, 300)) > 0 AS deciding
    FROM (SELECT * FROM folded UNION ALL SELECT * FROM marks) AS t
    JOIN f USING (provider, cluster, job_id)
)
SELECT provider, cluster, job_id, ts, last_ts, origin, node, category, severity, count, deciding,
       rule_id, line, ref
FROM lines
QUALIFY row_number() OVER (
            PARTITION BY provider, cluster, job_id
            ORDER BY origin = 'scheduler' DESC, deciding DESC,
                     CASE severity WHEN 'critical' THEN 0 WHEN 'error' THEN 1 WHEN 'warning' THEN 2 ELSE 3 END,
                     ts, ref)
        <= coalesce(getvariable('max_lines'), 40)
ORDER BY provider, cluster, job_id, ts NULLS LAST, origin DESC, ref
