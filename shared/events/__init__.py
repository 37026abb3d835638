"""The event bus ``step.wait_for_event`` listens on (memory, or ``x_job_events`` on Postgres
on the database clock), and ``publish_event()``.

The map:

- ``bus``: The event bus ``step.wait_for_event`` listens on, and ``publish_event()``.
- ``bus_postgres``: The stored event bus over ``x_job_events`` (``step.wait_for_event`` listens
  on it).
"""
