"""``ujobs dev``: every service in one process for a first run on a bare machine.

| Module | Holds |
|---|---|
| ``start`` | the dev session: the database (embedded or ``DATABASE_URL``), every role, the banner |
| ``watch`` | the running commentary: a line each time a job changes state or a task fires |
| ``embedded`` | a private Postgres (``pgserver``) when ``DATABASE_URL`` is unset |
"""
