-- server_autovacuum: whether this server runs autovacuum ('on' or 'off'): x_jobs' own
-- autovacuum settings (0001_jobs.sql) only apply when it does.
select current_setting('autovacuum') as autovacuum
