"""The NATS edge (DESIGN.md § NATS, § Streams): enqueue and events from any service that
speaks NATS, settlements out.

| Module | Owns |
|---|---|
| ``names`` | every subject, stream and consumer name, from one prefix (``UJOBS_NATS_PREFIX``) |
| ``edge`` | enqueue and ``publish_event`` behind tokens, scopes and tenancy (the HTTP edge's rules) |
| ``requests`` | request/reply on ``ujobs.enqueue.<job>`` and ``ujobs.events.<name>`` |
| ``service`` | the api's NATS connection and what runs on it |

Import the leaf modules; this package exports nothing itself.
"""  # noqa: E501
