-- outbox_wake_probe: sent through the POOL to prove the relay's LISTEN session hears the
-- channel (the probe has to come back on the session). A probe other relays hear costs them
-- one extra claim. $1 probe token
select pg_notify('x_outbox_wake', $1::text)
