-- paused: the names paused of one kind ('queue' or 'task'), sorted.
-- $1 kind
select p.name from x_job_pauses p where p.kind = $1::text order by p.name
