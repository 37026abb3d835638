-- lease_release: give the slot back at once.
-- $1 key  $2 holder
delete from x_job_leases l where l.key = $1::text and l.holder = $2::text
