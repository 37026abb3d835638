-- session_jit_reset: put this session's jit back to what the pool's sessions start with
-- (undoes session_jit_off before a held connection goes back to the caller's pool).
reset jit
