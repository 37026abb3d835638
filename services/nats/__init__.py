"""The NATS edge (DESIGN.md § NATS, § Streams): enqueue and events from any service that
speaks NATS, settlements out.

| Module | Owns |
|---|---|
| ``names`` | every subject, stream and consumer name, from one prefix (``UJOBS_NATS_PREFIX``) |
| ``edge`` | enqueue and ``publish_event`` behind tokens, scopes and tenancy (the HTTP edge's rules) |
| ``requests`` | request/reply on ``ujobs.enqueue.<job>`` and ``ujobs.events.<name>`` |
| ``service`` | the api's NATS connection and what runs on it |
| ``consumer`` | the JetStream consumer: every stream message ends, landed or refused |
| ``pull`` | the consumer's batched pulls |
| ``streams`` | the streams' declarations and their status |
| ``settlements`` | the settlements relay: a settled job's message out |
| ``settlements_redis`` | the same for the Redis driver's settlements stream |

Import the leaf modules; this package exports nothing itself.
"""  # noqa: E501
