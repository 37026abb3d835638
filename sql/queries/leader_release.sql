-- leader_release: hand the leader lease back, only if this holder still has it.
-- $1 key  $2 holder
delete from x_job_leases l where l.key = $1::text and l.slot = 0 and l.holder = $2::text
returning l.holder
