"""The reliability storm (issue 29): crashes, restarts and pauses under load, then a ledger
check. ``harness`` runs it over ``participants``; ``bench/storm.py`` is the full run."""
