-- daily_failures: failed jobs (counted_failed_jobs) and GPU-hours lost per UTC day (of the
-- job's end), cluster and root cause.
SELECT provider, cluster, day, root_cause, domain,
       count(*) AS failed_jobs, sum(gpus) AS gpus, round(sum(gpu_hours_lost), 3) AS gpu_hours_lost
FROM counted_failed_jobs
GROUP BY ALL
