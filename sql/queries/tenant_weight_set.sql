-- tenant_weight_set: an operator's weight for a tenant (1..1000, checked before and by the
-- table); the next claim reads it.  $1 tenant id  $2 weight
insert into x_tenant_weights as w (tenant_id, weight)
values ($1::text, $2::int)
on conflict (tenant_id) do update set weight = excluded.weight
returning w.weight
