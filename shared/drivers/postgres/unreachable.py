"""Which asyncpg failures mean "the database was not there", and what they leave the driver as.

Two questions, answered separately because their answers differ:

* ``connection_broken(exc)`` — must the connection the statement ran on be thrown away? Yes for
  anything that ends the session or leaves asyncpg's protocol in doubt: a connection-class
  error (SQLSTATE class 08, ``ConnectionDoesNotExistError`` among them), any error the server
  sent as FATAL or PANIC (it closes the session after sending it), an ``InternalClientError``
  (``cannot switch to state 12``: the protocol read a FATAL it did not expect while idle, and
  the close has not been read yet), and a socket error. A plain statement error (a constraint,
  a deadlock victim) leaves the session usable.
* ``store_unreachable(exc)`` — did the call fail only because the database could not be
  reached? Yes for the connection-class errors above and for the server refusing or ending
  sessions while it shuts down, crashes or starts (57P01 admin shutdown, 57P02 crash
  shutdown, 57P03 cannot connect now, 53300 too many connections), a refused or reset socket
  and a connect that timed out (the driver's statements carry no timeout, so a timeout can
  only be the connect's). Not a wrong password or a missing database: those are FATAL too,
  but no amount of waiting fixes them. Those leave the driver as ``X_DRIVER_UNREACHABLE``
  (``unreachable(exc)``), which the worker reads: a settle is sent again while the lease
  lasts, an attempt is handed back uncounted.
"""

from __future__ import annotations

import asyncpg

from ujobs.errors import DriverUnreachableError

SERVER_AWAY_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
"""admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections."""
_FATAL = frozenset({"FATAL", "PANIC"})


def connection_broken(exc: BaseException) -> bool:
    """The session ``exc`` came from must not run another statement."""
    if isinstance(exc, asyncpg.PostgresError) and getattr(exc, "severity", None) in _FATAL:
        return True
    return store_unreachable(exc)


def store_unreachable(exc: BaseException) -> bool:
    """``exc`` says the database could not be reached, not that it refused the statement."""
    if isinstance(exc, asyncpg.PostgresConnectionError | asyncpg.InternalClientError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        return exc.sqlstate in SERVER_AWAY_SQLSTATES
    if isinstance(exc, _NOT_THE_NETWORK):
        return False
    return isinstance(exc, OSError | TimeoutError)


_NOT_THE_NETWORK = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    LookupError,  # an OSError that is a lookup: jinja2's TemplateNotFound is both
)
"""OSErrors a statement never raises: a file or a template the process could not open is a
bug or a broken install, never Postgres away (a connect's refusal, reset or timeout is)."""


def unreachable(exc: BaseException) -> DriverUnreachableError:
    """``exc`` as the error that leaves the driver (the message names the cause, never the
    URL, so no password can reach a log line)."""
    return DriverUnreachableError(
        f"Postgres could not be reached ({type(exc).__name__}: {exc}); the statement did not "
        "run, or its answer was lost: try again once Postgres at DATABASE_URL answers",
        meta={"driver": "postgres", "cause": type(exc).__name__},
    )
