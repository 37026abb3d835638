"""The operator commands against a remote api: ``UJOBS_URL`` + ``UJOBS_TOKEN``, as ``kubectl``
and ``gh`` talk to a server.

When ``DATABASE_URL`` (or ``--database-url``) is unset, the driver is Postgres and ``UJOBS_URL``
is set, the commands with an HTTP route read it over HTTP instead of the database:

| Command | Route | Token |
|---|---|---|
| ``ujobs jobs list`` | ``GET /v1/jobs`` | ``read``; a tenant token's list is its tenant's |
| ``ujobs jobs show`` | ``GET /v1/jobs/{id}`` | ``read``; another tenant's job is ``X_JOB_NOT_FOUND`` |
| ``ujobs queues list`` | ``GET /v1/queues`` | an operator token with ``read`` |
| ``ujobs queues show`` | ``GET /v1/queues/{queue}`` | an operator token with ``read`` |
| ``ujobs tokens list`` | ``GET /v1/tokens`` | an operator token with ``admin`` |

Every other operator command reads the database itself and then answers ``X_CONFIG_INVALID``
naming ``DATABASE_URL`` (``remote_refused``). The api's refusals keep their own code (401, 403,
404, ...); an api that cannot be reached is ``X_API_UNREACHABLE``.
"""  # noqa: E501

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ujobs.errors import ConfigInvalidError, UltimateError
from ujobs.services.config.parse import invalid

REMOTE_COMMANDS = ("jobs list", "jobs show", "queues list", "queues show", "tokens list")
"""The operator commands that work against UJOBS_URL (each has an HTTP route)."""
TIMEOUT_S = 30.0


class ApiUnreachableError(UltimateError):
    """The api at ``UJOBS_URL`` could not be reached, or answered something that is not the
    api's JSON (a proxy's error page): check the URL and that the api runs."""

    code = "X_API_UNREACHABLE"


@dataclass(frozen=True, slots=True)
class Remote:
    """Where a remote operator command asks: the api's base URL and the bearer token."""

    url: str
    token: str

    def __repr__(self) -> str:
        return f"Remote(url={self.url!r}, token='***')"


def _set(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value is not None and value.strip() else None


def _goes_remote(env: Mapping[str, str], database_url: str | None, driver: str | None) -> bool:
    if database_url is not None or _set(env, "DATABASE_URL") is not None:
        return False
    if (driver or _set(env, "UJOBS_DRIVER") or "postgres") != "postgres":
        return False
    return _set(env, "UJOBS_URL") is not None


def remote_target(
    env: Mapping[str, str], *, database_url: str | None = None, driver: str | None = None
) -> Remote | None:
    """The api a remote-capable command asks, or None when it reads the database."""
    if not _goes_remote(env, database_url, driver):
        return None
    url = _set(env, "UJOBS_URL") or ""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise invalid(
            "UJOBS_URL", "must be the api's http(s):// base URL, e.g. http://127.0.0.1:8080"
        )
    token = _set(env, "UJOBS_TOKEN")
    if token is None:
        raise invalid(
            "UJOBS_TOKEN",
            "UJOBS_URL is set and DATABASE_URL is not, so this command asks the api at UJOBS_URL: "
            "set UJOBS_TOKEN to one of its tokens (`ujobs tokens create`), or set DATABASE_URL",
        )
    return Remote(url=url.rstrip("/"), token=token)


def remote_refused(
    env: Mapping[str, str], command: str, *, database_url: str | None, driver: str | None
) -> None:
    """``X_CONFIG_INVALID`` naming DATABASE_URL when UJOBS_URL alone is set and ``command``
    has no remote form, instead of a connection error about a database nobody named."""
    if _goes_remote(env, database_url, driver):
        raise ConfigInvalidError(
            f"DATABASE_URL: `{command}` reads the database itself; set DATABASE_URL (UJOBS_URL "
            f"reaches the api only for `ujobs {'`, `ujobs '.join(REMOTE_COMMANDS)}`)",
            meta={"variable": "DATABASE_URL", "remote": list(REMOTE_COMMANDS)},
        )


def remote_get(remote: Remote, path: str, query: Mapping[str, str | None] | None = None) -> Any:
    """GET ``path`` from the api as JSON; the api's error envelope is raised with its code."""
    params = {k: v for k, v in (query or {}).items() if v is not None}
    url = remote.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
    request = urllib.request.Request(
        url,
        headers={"Authorization": f"Bearer {remote.token}", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise _answered_error(exc.code, exc.read(), remote) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ApiUnreachableError(
            f"the api at UJOBS_URL ({remote.url}) could not be reached: {reason}",
            meta={"url": remote.url},
        ) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _not_the_api(remote, 200) from None


def _answered_error(status: int, body: bytes, remote: Remote) -> UltimateError:
    try:
        envelope = orjson.loads(body)
        error = envelope["error"]
        code, message = error["code"], error["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return _not_the_api(remote, status)
    if not (isinstance(code, str) and code.startswith("X_") and isinstance(message, str)):
        return _not_the_api(remote, status)
    meta = error.get("meta") if isinstance(error.get("meta"), dict) else {}
    return UltimateError(f"the api answered {status}: {message}", meta=meta, code=code)


def _not_the_api(remote: Remote, status: int) -> ApiUnreachableError:
    return ApiUnreachableError(
        f"UJOBS_URL ({remote.url}) answered {status} without the api's JSON; is it the api's "
        "base URL?",
        meta={"url": remote.url, "status": status},
    )


__all__ = [
    "REMOTE_COMMANDS",
    "ApiUnreachableError",
    "Remote",
    "remote_get",
    "remote_refused",
    "remote_target",
]
