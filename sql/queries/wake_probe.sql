-- wake_probe: prove a LISTEN session. The wake publishes a probe token on its channel through
-- the pool; the session that hears it is live. $1 channel, $2 token (never a queue name).
select pg_notify($1::text, $2::text)
