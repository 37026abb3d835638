insert into x_migrations (id, checksum) values ($1, $2)
