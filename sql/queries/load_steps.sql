-- load_steps: the completed steps of a run, in the order they were saved.
-- $1 run id
select s.name, s.output::text as output, s.seq,
       x_ms(s.started_at) as started_at_ms, x_ms(s.finished_at) as finished_at_ms
  from x_job_steps s
 where s.run_id = $1::text
 order by s.seq
