-- lease_release: give slots back at once, every (key, holder) pair of the batch in one
-- statement (the releases of a busy worker's slots share one commit).
-- $1 keys  $2 holders (pairwise)
delete from x_job_leases l
 using unnest($1::text[], $2::text[]) as r(key, holder)
 where l.key = r.key and l.holder = r.holder
