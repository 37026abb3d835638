"""A cron task handing each occurrence to one job."""

from __future__ import annotations

from typing import Any

from tests.unit.sample_app.mail import notify
from ujobs import task

USER = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"


@task(cron="0 3 * * *", tz="America/Bogota", catch_up="run-once")
def nightly_digest(occurrence_ms: int) -> list[tuple[Any, Any]]:
    """Tell one user about last night's items."""
    return [(notify, {"user_id": USER, "items": [{"id": str(occurrence_ms)}]})]
