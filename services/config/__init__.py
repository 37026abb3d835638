"""Every setting a service reads from the environment, validated once into frozen objects.

| Module | Holds |
|---|---|
| ``variables`` | the one table of every ``UJOBS_*`` variable (the configuration reference page) |
| ``parse`` | parsers for environment values, each naming its variable in a refusal |
| ``settings`` | the per-service config objects (``ApiConfig``, ``WorkerConfig``, …) |
"""
