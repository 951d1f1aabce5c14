-- name: new_signatures
-- description: Message templates of `unknown` events (errors that neither the rules nor the model could name) first seen in the last N days: candidates for a new rule.
-- param: days (int, default: 7) how far back "new" reaches, counting the as_of day
-- param: as_of (date, default: NULL = latest day in the warehouse)
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: max_rows (int, default: 50) rows to return
WITH ref AS (
    SELECT coalesce(getvariable('as_of'), (SELECT max(date) FROM events)) AS day
), u AS (
    SELECT * FROM events
    WHERE category = 'unknown' AND template IS NOT NULL
      AND date <= (SELECT day FROM ref)
      AND (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
), sig AS (
    SELECT template, min(date) AS first_day, min(ts) AS first_seen, max(ts) AS last_seen,
           sum(coalesce(repeats, 1)) AS events, count(DISTINCT node) AS nodes, count(DISTINCT job_id) AS jobs,
           string_agg(DISTINCT provider || '/' || cluster, ', ' ORDER BY provider || '/' || cluster) AS seen_in,
           arg_min(family, (date, source, line_no)) AS family,
           arg_min(severity, (date, source, line_no)) AS severity,
           arg_min(rule_id, (date, source, line_no)) AS rule_id,
           arg_min(split_part(raw, chr(10), 1), (date, source, line_no)) AS sample,
           arg_min(source || ':' || line_no, (date, source, line_no)) AS sample_source
    FROM u
    GROUP BY template
)
SELECT template, first_day, first_seen, last_seen, events, nodes, jobs, seen_in, family, severity,
       rule_id, sample, sample_source
FROM sig
WHERE first_day > (SELECT day FROM ref) - coalesce(getvariable('days'), 7)
ORDER BY first_day DESC, events DESC, template
LIMIT coalesce(getvariable('max_rows'), 50)
