-- Whether the migrations ledger exists at all (a database `ujobs db migrate` never touched).
select to_regclass('x_migrations') is not null
