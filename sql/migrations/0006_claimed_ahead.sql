-- 0006: a row claimed AHEAD of a free slot (a worker's claim-ahead buffer) and not started
-- yet. The claim counts its attempt like any other, and sets `ahead` for the rows past the
-- worker's free slots; `start_ahead` clears it (fenced on the claim) once the body runs.
-- A running row whose lease lapses with it still set never ran: the next claim hands it out
-- with the SAME attempt and never buries it (sql/queries/claim.sql), so a worker that dies
-- with rows in its buffer costs their jobs nothing. The worker marks a row once its body has
-- run a moment (10 ms; a shorter body's settle makes the mark moot) and never waits for it, so
-- a body that kills its worker at once looks unstarted: `ahead_returns` counts the uncounted
-- hand-backs of a row, and past the cap the claim passes ($10) a lapse counts as any other —
-- a poison pill still exhausts its attempts.
-- Not indexed, so clearing `ahead` can be a HOT update. Constant defaults: the columns are
-- added to the catalog only, no row is rewritten.
alter table x_jobs add column ahead boolean not null default false;
alter table x_jobs add column ahead_returns integer not null default 0;
