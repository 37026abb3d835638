"""The benchmark scripts' own tests, run with the benches (``pytest bench/tests``), not by the
product suite (``pytest`` from the root collects ``tests/`` only). They use the product suite's
servers and isolated databases (``tests/support/services.py``)."""

from __future__ import annotations

pytest_plugins = ["tests.support.services"]
