-- events_purge: delete expired events; answers how many rows went.
with gone as (delete from x_job_events e where e.expires_at <= now() returning 1)
select count(*) as removed from gone
