-- outbox_pending: the relay's backlog - rows staged and committed but not yet published.
select count(*) as pending from x_outbox where published_at is null
