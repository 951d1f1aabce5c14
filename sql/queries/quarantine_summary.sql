-- name: quarantine_summary
-- description: Lines the ingest could not read, per cluster and reason: how many, in how many files, on which days, their share of all lines read, and a first example.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: since (date, default: NULL = first covered day)
-- param: until (date, default: NULL = last covered day)
WITH q AS (
    SELECT * FROM quarantine
    WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
      AND (getvariable('since') IS NULL OR date >= getvariable('since'))
      AND (getvariable('until') IS NULL OR date <= getvariable('until'))
), lines AS (
    SELECT provider, cluster, sum(lines_read) AS lines_read
    FROM ingest_audit
    WHERE (getvariable('since') IS NULL OR date >= getvariable('since'))
      AND (getvariable('until') IS NULL OR date <= getvariable('until'))
    GROUP BY ALL
)
SELECT provider, cluster, reason, count(*) AS lines, count(DISTINCT source) AS files,
       min(date) AS first_day, max(date) AS last_day,
       round(count(*) / nullif(any_value(l.lines_read), 0), 6) AS share_of_lines_read,
       arg_min(detail, (date, source, line_no)) AS example_detail,
       arg_min(preview, (date, source, line_no)) AS example_preview,
       arg_min(source || coalesce(':' || line_no, ''), (date, source, line_no)) AS example_source
FROM q
LEFT JOIN lines AS l USING (provider, cluster)
GROUP BY provider, cluster, reason
ORDER BY lines DESC, provider, cluster, reason
