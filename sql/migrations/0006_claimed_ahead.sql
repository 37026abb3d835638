-- 0006: a row claimed AHEAD of a free slot (a worker's claim-ahead buffer) and not started
-- yet. The claim counts its attempt like any other, and sets this for the rows past the
-- worker's free slots; `start_ahead` clears it (fenced on the claim) before the body runs.
-- A running row whose lease lapses with it still set never ran: the next claim hands it out
-- with the SAME attempt and never buries it (sql/queries/claim.sql), so a worker that dies
-- with rows in its buffer costs their jobs nothing. A poison pill still counts: it was
-- started, so the flag was cleared before its body could kill the worker.
-- Not indexed, so clearing it can be a HOT update. A constant default: the column is added
-- to the catalog only, no row is rewritten.
alter table x_jobs add column ahead boolean not null default false;
