-- counted_incidents: what "incidents" counts, everywhere: one row per node incident of
-- severity error or critical, with the UTC `day` it began and whether its rack shares it
-- (`rack_shared`: several nodes of the rack failed together; a node's failure rate leaves
-- those to the rack, see node_failures). Info and warning incidents are never counted.
SELECT *, CAST(timezone('UTC', first_ts) AS DATE) AS day, rack_incident_id IS NOT NULL AS rack_shared
FROM incidents
WHERE severity IN ('error', 'critical')
