"""Log lines are one JSON object each, with the spec's event name, and never a secret."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from ujobs.errors import DriverUnavailableError
from ujobs.services.redact import redact_text, redact_url
from ujobs.services.runtime.logging import configure_logging


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = configure_logging("worker", "DEBUG", stream=stream)
    yield stream
    logging.getLogger().removeHandler(handler)


def parsed(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_carries_ts_level_event_service_and_the_extra_fields(lines: io.StringIO) -> None:
    logging.getLogger("ujobs.jobs").warning(
        "jobs.worker.drain-abandoned", extra={"in_flight": 2, "queues": ("a", "b")}
    )
    [line] = parsed(lines)
    assert line["event"] == "jobs.worker.drain-abandoned"
    assert line["level"] == "warning"
    assert line["service"] == "worker"
    assert line["logger"] == "ujobs.jobs"
    assert line["in_flight"] == 2
    assert line["queues"] == ["a", "b"]
    assert str(line["ts"]).endswith("+00:00")


def test_no_secret_reaches_a_line(lines: io.StringIO) -> None:
    log = logging.getLogger("ujobs.service")
    try:
        raise OSError("could not connect to postgresql://app:hunter2@db/app")
    except OSError:
        log.exception(
            "ujobs.service.failed",
            extra={
                "url": "redis://:t0ps3cret@cache:6379",
                "error": DriverUnavailableError("password=letmein rejected"),
            },
        )
    text = lines.getvalue()
    for secret in ("hunter2", "t0ps3cret", "letmein"):
        assert secret not in text
    [line] = parsed(lines)
    assert line["url"] == "redis://:***@cache:6379"
    assert line["error"] == {
        "code": "X_DRIVER_UNAVAILABLE",
        "message": "DriverUnavailableError: X_DRIVER_UNAVAILABLE: password=*** rejected",
    }
    assert "postgresql://app:***@db/app" in str(line["exception"])


def test_configure_twice_keeps_one_handler(lines: io.StringIO) -> None:
    configure_logging("api", "INFO", stream=lines)
    logging.getLogger("ujobs.api").info("ujobs.api.listening")
    logging.getLogger("ujobs.api").debug("not shown at info")
    [line] = parsed(lines)
    assert line["service"] == "api"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://u:p@h/db", "postgresql://u:***@h/db"),
        (
            "postgres://u:p%40ss@h:5432/db?sslmode=require",
            "postgres://u:***@h:5432/db?sslmode=require",
        ),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("nats://h:4222", "nats://h:4222"),
        ("dsn host=h password=secret user=u", "dsn host=h password=*** user=u"),
        ("https://h/path?token=abc&x=1", "https://h/path?token=***&x=1"),
        ("no secrets here", "no secrets here"),
    ],
)
def test_redact_text(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_redact_url_keeps_the_user_and_host() -> None:
    assert redact_url("postgresql://app:s3cr@t@db/app") == "postgresql://app:***@db/app"
