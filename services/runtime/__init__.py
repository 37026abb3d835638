"""What every service process shares: its run, its wiring to the backends, its logs and metrics.

| Module | Holds |
|---|---|
| ``service_run`` | one shape for every service: config, logs, start, drain on SIGTERM, exit |
| ``wiring`` | the driver a service enqueues through and the wake its loops listen to |
| ``backends`` | the one place a pool or a client is opened from a config |
| ``app_loader`` | the app's ``Api`` from ``--app module:attribute`` (``UJOBS_APP``) |
| ``schema_check`` | the schema a service refuses to run on (``X_SCHEMA_OUTDATED``) |
| ``autovacuum_check`` | the start warning when autovacuum does not run on ``x_jobs`` |
| ``secret_key`` | where ``UJOBS_SECRET_KEY`` comes from (the variable or a file) |
| ``output`` | how every command and service talks on the terminal (JSON, tables, errors) |
| ``logging`` | one JSON object per log line, never a secret |
| ``log_limit`` | at most one log line per reason per window |
| ``metrics_server`` | ``/metrics``, ``/healthz``, ``/readyz`` for the services without an api |
| ``service_metrics`` | the relay's and the scheduler's own Prometheus series |
| ``gc_tuning`` | the collector's first threshold in a service process (``UJOBS_GC_THRESHOLD``) |
| ``event_loop`` | the loop a service process runs on: uvloop or asyncio (``UJOBS_EVENT_LOOP``) |
| ``retention`` | the built-in ``x.purge`` the worker and the scheduler register at boot |
"""
