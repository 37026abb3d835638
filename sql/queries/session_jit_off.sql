-- session_jit_off: turn JIT off for this session, on a connection the driver holds from a pool
-- it did not build (one whose sessions start with jit on); session_jit_reset undoes it before
-- the connection goes back.
set jit = off
