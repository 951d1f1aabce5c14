-- xid_events: every NVIDIA Xid / NVSwitch SXid event with the node's rack, GPU model and the
-- UTC day it happened (timestamps are UTC; `day` does not depend on the session time zone);
-- a collapsed flood is one row whose `repeats` counts its lines.
SELECT e.provider, e.cluster, i.rack, e.node, i.gpu_model, e.gpu_pci, e.gpu_uuid, e.gpu_serial,
       e.ts, CAST(timezone('UTC', e.ts) AS DATE) AS day, e.xid, e.sxid, e.category, e.domain,
       e.severity, e.action, e.rule_id, e.job_id, e.template, e.message, e.event_id, e.source,
       coalesce(e.repeats, 1) AS repeats, e.last_ts
FROM events AS e
LEFT JOIN inventory_latest AS i USING (provider, cluster, node)
WHERE e.xid IS NOT NULL OR e.sxid IS NOT NULL
