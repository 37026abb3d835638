-- jobs_purge_busy: how many OTHER sessions of this database are running a statement right now
-- (client backends only: autovacuum and the server's own workers are not the queue's load).
-- The jobs sweep reads it before it rests between two batches: workers claiming and settling,
-- an api enqueueing, a relay publishing all show here, whichever process they run in, so a
-- sweep beside them rests longer and leaves them the database (a sweep alone keeps its pace).
-- pg_stat_activity shows every session of the same role; a role that cannot see another's
-- state reads it as null, which counts as idle.
select count(*)::int as active
  from pg_stat_activity
 where datname = current_database()
   and pid <> pg_backend_pid()
   and backend_type = 'client backend'
   and state = 'active'
