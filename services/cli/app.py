"""``ujobs``: every service and every operator command, one entry point (typer).

This module is the full root: ``app`` holds every command of ``ujobs.services.cli.root``'s
table (``cli.jobs``, ``cli.queues``, ``cli.db``, the services, ``manifest``), for the tests and
the reference pages that read the whole CLI. The console script is ``root.main``, which loads
only the command it runs. How a command prints, fails and shows progress is
``runtime.output``; how it reaches the backend is ``cli.common``.

Errors print their ``X_…`` code and a sentence of what to do, and exit non-zero (1; 70 for an
unexpected failure, whose detail ``ujobs --debug …`` shows); ``--json`` prints machine-readable
output on every command.
"""

from __future__ import annotations

from ujobs.services.cli.root import build, main

app = build()

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
