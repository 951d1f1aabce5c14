-- counted_failed_jobs: what "failed jobs" counts, everywhere: one row per job that did not
-- complete (job_failures), with the UTC `day` it ended and whether it is an `infrastructure`
-- failure (root cause in the hardware or software domain: GPU, network, host, storage,
-- thermal, driver). User and scheduler failures are failed jobs too, never infrastructure.
SELECT *, CAST(timezone('UTC', ended) AS DATE) AS day,
       coalesce(domain IN ('hardware', 'software'), false) AS infrastructure
FROM job_failures
