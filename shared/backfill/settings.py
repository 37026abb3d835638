"""What a process tells its backfills about itself: the deployment's environment name (checked
against a declaration's ``environments``) and the app version written on each ledger row. The
services set both at boot from their config; ``shared`` never reads the environment itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackfillSettings:
    environment: str | None = None
    app_version: str | None = None


_settings = BackfillSettings()


def configure_backfills(*, environment: str | None, app_version: str | None = None) -> None:
    """Set this process's environment name and app version (None: not known)."""
    global _settings
    _settings = BackfillSettings(environment=environment, app_version=app_version)


def backfill_settings() -> BackfillSettings:
    return _settings


def reset_backfill_settings() -> None:
    """Test seam."""
    configure_backfills(environment=None, app_version=None)
