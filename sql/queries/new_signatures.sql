-- name: new_signatures
-- description: Signatures (unknown_signatures: lines the rules could not name, grouped by masked template and merged when near-identical) first seen in the last N days, with the learned model's guess: candidates for a new rule. Counts cover every covered day.
-- param: days (int, default: 7) how far back "new" reaches, counting the as_of day
-- param: as_of (date, default: NULL = latest day in the warehouse)
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: max_rows (int, default: 50) rows to return
WITH ref AS (
    SELECT coalesce(getvariable('as_of'), (SELECT max(date) FROM ingest_audit)) AS day
)
SELECT signature_id, template, first_day, last_day, first_seen, last_seen, count AS events, n_nodes AS nodes,
       n_jobs AS jobs, n_templates AS templates, array_to_string(clusters, ', ') AS seen_in,
       predicted_category, round(confidence, 3) AS confidence, resolved_by_model, example AS sample, sample_source
FROM unknown_signatures
WHERE first_day <= (SELECT day FROM ref)
  AND first_day > (SELECT day FROM ref) - coalesce(getvariable('days'), 7)
  AND (getvariable('provider') IS NULL OR EXISTS (
           SELECT 1 FROM (SELECT unnest(clusters) AS c) WHERE split_part(c, '/', 1) = getvariable('provider')))
  AND (getvariable('cluster') IS NULL OR EXISTS (
           SELECT 1 FROM (SELECT unnest(clusters) AS c) WHERE split_part(c, '/', 2) = getvariable('cluster')))
ORDER BY resolved_by_model, first_day DESC, events DESC, template
LIMIT coalesce(getvariable('max_rows'), 50)
