-- event_now: the bus clock, epoch ms (the database's, truncated as publish stamps it).
select x_ms(date_trunc('milliseconds', now())) as now_ms
