-- tenant_weight: one tenant's weight in the fair claim (1 when no operator set one).
-- $1 tenant id
select coalesce((select w.weight from x_tenant_weights w where w.tenant_id = $1::text), 1)
