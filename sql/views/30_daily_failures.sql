-- daily_failures: failed jobs and GPU-hours lost per UTC day (of the job's end), cluster and
-- root cause.
SELECT provider, cluster, CAST(timezone('UTC', ended) AS DATE) AS day, root_cause, domain,
       count(*) AS failed_jobs, sum(gpus) AS gpus, round(sum(gpu_hours_lost), 3) AS gpu_hours_lost
FROM job_failures
GROUP BY ALL
