-- 0007: how many times each row was handed back UNCOUNTED because its attempt failed only
-- because the driver could not reach the database (X_DRIVER_UNREACHABLE: a restart, a
-- failover). The worker gives such an attempt back without spending it, but a row must never
-- loop forever uncounted (a step whose write crashes the server would restart it for ever),
-- so the nack that hands one back is fenced on this tally being under the worker's cap and
-- adds one (sql/queries/nack.sql); at the cap the attempt fails the ordinary, counted way.
-- A constant default: the column is added to the catalog only, no row is rewritten.
alter table x_jobs add column unreachable_returns integer not null default 0;
