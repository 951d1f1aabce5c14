-- name: xid_by_gpu_model
-- description: NVIDIA Xid events per GPU model and Xid code, with the GPUs and nodes affected and the rate per 1,000 GPU-days of that model in service over the same days.
-- param: provider (text, default: NULL = every provider)
-- param: cluster (text, default: NULL = every cluster)
-- param: since (date, default: NULL = first covered day) first UTC day counted
-- param: until (date, default: NULL = last covered day) last UTC day counted
WITH days AS (
    SELECT DISTINCT provider, cluster, date AS day FROM ingest_audit
    WHERE (getvariable('provider') IS NULL OR provider = getvariable('provider'))
      AND (getvariable('cluster') IS NULL OR cluster = getvariable('cluster'))
      AND (getvariable('since') IS NULL OR date >= getvariable('since'))
      AND (getvariable('until') IS NULL OR date <= getvariable('until'))
), exposure AS (
    SELECT coalesce(i.gpu_model, '(unknown model)') AS gpu_model, sum(i.gpus) AS gpu_days
    FROM days AS d
    JOIN inventory_latest AS i USING (provider, cluster)
    WHERE (i.in_service_from IS NULL OR d.day >= i.in_service_from)
      AND (i.in_service_to IS NULL OR d.day <= i.in_service_to)
    GROUP BY ALL
), x AS (
    SELECT coalesce(x.gpu_model, '(unknown model)') AS gpu_model, x.*
    EXCLUDE (gpu_model)
    FROM xid_events AS x
    JOIN days AS d ON d.provider = x.provider AND d.cluster = x.cluster AND d.day = x.day
    WHERE x.xid IS NOT NULL
)
SELECT gpu_model, xid, arg_min(category, (ts, event_id)) AS category, sum(repeats) AS events,
       count(DISTINCT node || '/' || coalesce(gpu_pci, '?')) AS gpus_affected,
       count(DISTINCT node) AS nodes_affected, min(ts) AS first_seen, max(coalesce(last_ts, ts)) AS last_seen,
       CAST(any_value(e.gpu_days) AS BIGINT) AS gpu_days,
       round(sum(repeats) * 1000.0 / nullif(any_value(e.gpu_days), 0), 3) AS events_per_1k_gpu_days
FROM x
LEFT JOIN exposure AS e USING (gpu_model)
GROUP BY gpu_model, xid
ORDER BY gpu_model, events DESC, xid
