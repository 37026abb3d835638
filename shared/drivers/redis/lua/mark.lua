-- mark.lua: the keyspace mark (prelude.lua's store_mark), written when there is none.
--
-- ARGV: candidate (a fresh random token)
-- Returns the mark: the token already there, or `candidate`. A worker whose held row was
-- refused asks this to tell a wiped keyspace (a Redis restarted without persistence: the
-- mark is gone, or another process wrote a new one) from an ordinary lost lease.

return store_mark(ARGV[1])
