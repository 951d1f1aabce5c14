-- inventory_latest: one row per node, from the node's latest daily inventory snapshot.
-- The lake keeps one inventory snapshot per (provider, cluster, date) partition; this is
-- the fleet as last seen (rack, GPU model, leaf switch, service window).
SELECT provider, cluster, rack, node, gpus, gpu_model, leaf_switch, in_service_from, in_service_to,
       date AS snapshot_date
FROM inventory
QUALIFY row_number() OVER (PARTITION BY provider, cluster, node ORDER BY date DESC) = 1
