"""Which failures read as "Postgres was not there" (``store_unreachable``): a refused, reset or
timed-out connection does; a file or a template the process could not open does not (it once
read as X_DRIVER_UNREACHABLE, "Postgres could not be reached (TemplateNotFound…)")."""

from __future__ import annotations

import jinja2
import pytest

from ujobs.drivers.postgres.unreachable import store_unreachable


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionRefusedError(111, "Connect call failed"),
        ConnectionResetError(104, "reset by peer"),
        TimeoutError(),
        OSError("Multiple exceptions: [Errno 111] Connect call failed, [Errno 99] ..."),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_connection_that_failed_is_the_store_away(exc: BaseException) -> None:
    assert store_unreachable(exc)


@pytest.mark.parametrize(
    "exc",
    [
        jinja2.TemplateNotFound("queue.html"),
        FileNotFoundError(2, "No such file or directory"),
        PermissionError(13, "Permission denied"),
        IsADirectoryError(21, "Is a directory"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_file_the_process_could_not_open_is_no_outage(exc: BaseException) -> None:
    assert not store_unreachable(exc)
