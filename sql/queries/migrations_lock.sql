-- Held until this transaction ends: two migrators queue here instead of racing.
select pg_advisory_xact_lock($1)
