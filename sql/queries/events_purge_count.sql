-- events_purge_count: how many expired events an events_purge pass would delete (the
-- database clock decides, as for the purge).
select count(*) as expired from x_job_events e where e.expires_at <= now()
