"""The wake: an enqueue's announce reaches idle loops at once (in this process, over Redis
pub/sub or Postgres LISTEN/NOTIFY), proven by a probe, so a loop sleeps without polling.

The map:

- ``announce``: The announcing side of the wake: after an enqueue, tell this process's loops at
  once and other processes through the Redis channel.
- ``announce_introspect``: The operator surface of an announcing driver: every call delegated,
  and the ones that make rows due announce their queue (unthrottled — the spec never has them
  stay silent).
- ``announce_results``: The result waits of an announcing driver: every call delegated, and a
  watch that finds its row due (waiting to start) announces the row's queue to other
  processes, unthrottled.
- ``listener``: The wake: announces of "a row is due on this queue" from other processes, proven
  by a probe.
- ``local``: The in-process wake: an enqueue made in THIS process wakes this process's loops at
  once.
- ``protocol``: What an idle loop needs from the wake, and how long it may sleep without one.
- ``session``: What a wake transport provides: one dialled subscription (``WakeSession``).
- ``transport_postgres``: The Postgres transport of the wake: ONE dedicated ``LISTEN``
  connection per dial, probes sent through the pool (``sql/queries/wake_probe.sql``).
- ``transport_redis``: The Redis transport of the wake: one SUBSCRIBE connection per dial,
  probes published through another connection.
"""
