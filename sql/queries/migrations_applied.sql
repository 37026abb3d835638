select id, checksum from x_migrations order by id
