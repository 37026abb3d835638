"""A private Postgres for a first run and for tests, from the ``pgserver`` package.

``ujobs dev`` with no ``DATABASE_URL`` starts one under ``./.ujobs/pg`` (kept between runs, so
a second ``ujobs dev`` finds its jobs again); the test fixtures start a throwaway one when no
server answers at ``TEST_DATABASE_URL``. It listens on a Unix socket inside its data directory
and on no TCP port at all, so nothing else on the machine can reach it and no port can clash.

pgserver stops the server when the last process that asked for it exits (it counts its users
in the data directory), so a crashed ``ujobs dev`` leaves nothing running for long, and two
``ujobs dev`` in one directory share one server.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ujobs.errors import DriverUnavailableError

Cleanup = Literal["stop", "delete"]


@dataclass(frozen=True, slots=True)
class EmbeddedPostgres:
    """A running private server: ``url`` reaches its ``postgres`` database over the socket."""

    url: str
    data_dir: Path
    _server: Any

    def stop(self) -> None:
        """Release this process's hold; the server stops when no process holds it."""
        self._server.cleanup()


def _pgserver() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset on most containers; harmless.
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        raise DriverUnavailableError(
            "no DATABASE_URL, and the embedded Postgres is not installed: "
            "pip install 'ultimate-jobs[embedded]', or set DATABASE_URL=postgresql://…",
            meta={"variable": "DATABASE_URL"},
        ) from None
    return pgserver


def start_embedded_postgres(data_dir: Path, *, cleanup: Cleanup = "stop") -> EmbeddedPostgres:
    """Start (or join) the server whose data lives in ``data_dir`` (created when missing).

    ``cleanup="delete"`` removes the data directory when the last holder stops it (tests).
    """
    pgserver = _pgserver()
    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(data_dir, cleanup_mode=cleanup)
    except Exception as exc:
        raise DriverUnavailableError(
            f"the embedded Postgres in {data_dir} did not start ({type(exc).__name__}: {exc}); "
            f"its log is {data_dir / 'log'}",
            meta={"data_dir": str(data_dir)},
        ) from exc
    return EmbeddedPostgres(url=str(server.get_uri()), data_dir=data_dir, _server=server)
