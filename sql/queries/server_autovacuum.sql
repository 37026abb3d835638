-- server_autovacuum: what keeps autovacuum off x_jobs on this server, as the settings to change
-- (an empty array: nothing). x_jobs' own autovacuum settings (0001_jobs.sql) only apply when the
-- server runs autovacuum, counts row changes for it (track_counts) and the table was not
-- opted out (autovacuum_enabled).
select array_remove(array[
         case when current_setting('autovacuum') = 'off' then 'autovacuum = on' end,
         case when current_setting('track_counts') = 'off' then 'track_counts = on' end,
         case when exists (select 1
                             from pg_class c, unnest(c.reloptions) as o(opt)
                            where c.oid = 'x_jobs'::regclass
                              and o.opt ~* '^autovacuum_enabled=(false|off|no|0)$')
              then 'alter table x_jobs reset (autovacuum_enabled)' end
       ], null) as fixes
