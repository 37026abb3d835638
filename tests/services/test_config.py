"""The services' config: one frozen object per service, bad values refused at start with the
variable's name (and "did you mean"), flags over variables, no password ever shown."""

from __future__ import annotations

import dataclasses

import pytest

from ujobs.errors import ConfigInvalidError, DriverUnavailableError, UltimateError
from ujobs.services.cli.services import reads
from ujobs.services.config.parse import Concurrency
from ujobs.services.config.settings import (
    ApiConfig,
    OperatorConfig,
    SchedulerConfig,
    WorkerConfig,
    read_common,
)
from ujobs.services.config.variables import VARIABLES

PG = "postgresql://app:s3cret@db.internal:5432/app"


def refused(call: object) -> UltimateError:
    assert callable(call)
    with pytest.raises(UltimateError) as caught:
        call()
    return caught.value


def test_defaults_need_only_a_database() -> None:
    config = WorkerConfig.load({"DATABASE_URL": PG})
    assert config.queues == ("default",)
    assert config.concurrency == Concurrency(default=8)
    assert config.max_in_flight is None
    assert config.claim_ahead is None
    assert config.claim_ahead_rows() == 128  # one queue: at most sixteen rows ahead per slot
    assert config.visibility_timeout_ms == 30_000
    assert config.common.drain_deadline_ms == 25_000
    assert config.common.gc_threshold == 10_000
    assert config.common.event_loop == "auto"
    assert config.common.connections.driver == "postgres"
    assert config.common.log_level == "info"


def test_every_value_is_read_from_its_variable() -> None:
    config = WorkerConfig.load(
        {
            "DATABASE_URL": PG,
            "REDIS_URL": "redis://:pw@cache:6379/1",
            "UJOBS_APP": "myapp.jobs:api",
            "UJOBS_QUEUES": "a, b,a",
            "UJOBS_CONCURRENCY": "a=2,b=16",
            "UJOBS_MAX_IN_FLIGHT": "10",
            "UJOBS_CLAIM_AHEAD": "0",
            "UJOBS_VISIBILITY_TIMEOUT_MS": "60_000",
            "UJOBS_RESULT_MAX_BYTES": "1024",
            "UJOBS_DRAIN_DEADLINE_MS": "600000",
            "UJOBS_GC_THRESHOLD": "0",
            "UJOBS_EVENT_LOOP": "AsyncIO",
            "UJOBS_LOG_LEVEL": "DEBUG",
            "UJOBS_DRIVER": "redis",
        }
    )
    assert config.queues == ("a", "b")
    assert config.concurrency.for_queue("a") == 2
    assert config.concurrency.for_queue("b") == 16
    assert config.concurrency.for_queue("other") == 8
    assert config.max_in_flight == 10
    assert config.claim_ahead == 0
    assert config.claim_ahead_rows() == 0  # two queues: never, whatever the variable says
    assert config.visibility_timeout_ms == 60_000
    assert config.result_max_bytes == 1024
    assert config.common.drain_deadline_ms == 600_000
    assert config.common.gc_threshold == 0
    assert config.common.event_loop == "asyncio"
    assert config.common.log_level_number == 10
    assert config.common.app == "myapp.jobs:api"
    assert config.common.connections.driver == "redis"


def test_the_config_is_frozen() -> None:
    config = WorkerConfig.load({"DATABASE_URL": PG})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.queues = ("x",)  # type: ignore[misc]


def test_flags_override_their_variables_and_are_named_when_bad() -> None:
    env = {"DATABASE_URL": PG, "UJOBS_QUEUES": "a", "UJOBS_DRIVER": "postgres"}
    config = WorkerConfig.load(env, queues="b,c", concurrency="4", max_in_flight=3)
    assert config.queues == ("b", "c")
    assert config.concurrency.default == 4
    assert config.max_in_flight == 3
    error = refused(lambda: WorkerConfig.load(env, queues="ok,bad queue"))
    assert error.code == "X_CONFIG_INVALID"
    assert error.message.startswith("--queues / UJOBS_QUEUES: 'bad queue'")


def test_pinned_queues_ignore_ujobs_queues() -> None:
    config = WorkerConfig.load(
        {"DATABASE_URL": PG, "UJOBS_QUEUES": "a"}, service="exporter", pinned_queues=("exports",)
    )
    assert config.queues == ("exports",)
    assert config.common.service == "exporter"

    config = WorkerConfig.load({"DATABASE_URL": PG, "UJOBS_CLAIM_AHEAD": "3"}, concurrency="16")
    assert config.claim_ahead_rows() == 3


@pytest.mark.parametrize(
    ("env", "starts", "hint"),
    [
        ({"UJOBS_CONCURRENCY": "eight"}, "UJOBS_CONCURRENCY: 'eight' is not a whole number", ""),
        ({"UJOBS_CONCURRENCY": "0"}, "UJOBS_CONCURRENCY: 0 is below the least allowed, 1", ""),
        ({"UJOBS_CONCURRENCY": "a=2,b"}, "UJOBS_CONCURRENCY: 'b' is not queue=number", ""),
        ({"UJOBS_MAX_IN_FLIGHT": "-1"}, "UJOBS_MAX_IN_FLIGHT: '-1' is not a whole number", ""),
        ({"UJOBS_MAX_IN_FLIGHT": "1.5"}, "UJOBS_MAX_IN_FLIGHT: '1.5'", ""),
        ({"UJOBS_CLAIM_AHEAD": "-1"}, "UJOBS_CLAIM_AHEAD: '-1' is not a whole number", ""),
        ({"UJOBS_DRIVER": "postgresql"}, "UJOBS_DRIVER: 'postgresql' is not one of", "'postgres'"),
        ({"UJOBS_DRIVER": "rediss"}, "UJOBS_DRIVER", "'redis'"),
        ({"UJOBS_LOG_LEVEL": "warn"}, "UJOBS_LOG_LEVEL", "'warning'"),
        ({"UJOBS_QUEUES": ","}, "UJOBS_QUEUES: an empty queue name", ""),
        ({"UJOBS_APP": "myapp.jobs"}, "UJOBS_APP: must be 'module:attribute'", ""),
        ({"UJOBS_DRAIN_DEADLINE_MS": "25s"}, "UJOBS_DRAIN_DEADLINE_MS: '25s'", ""),
        ({"UJOBS_GC_THRESHOLD": "-5"}, "UJOBS_GC_THRESHOLD: '-5' is not a whole number", ""),
        ({"UJOBS_EVENT_LOOP": "uvlop"}, "UJOBS_EVENT_LOOP: 'uvlop' is not one of", "'uvloop'"),
        ({"UJOBS_VISIBILITY_TIMEOUT_MS": "10"}, "UJOBS_VISIBILITY_TIMEOUT_MS: 10 is below", ""),
        ({"UJOBS_RESULT_MAX_BYTES": "0"}, "UJOBS_RESULT_MAX_BYTES: 0 is below", ""),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL: 'localhost:6379' is not a URL", ""),
        ({"REDIS_URL": "redsi://h"}, "REDIS_URL: scheme 'redsi'", "'redis'"),
        (
            {"UJOBS_CONCURENCY": "4"},
            "UJOBS_CONCURENCY: no ujobs service reads",
            "'UJOBS_CONCURRENCY'",
        ),
        ({"UJOBS_QUEUE": "a"}, "UJOBS_QUEUE: no ujobs service reads", "'UJOBS_QUEUES'"),
    ],
)
def test_a_bad_value_fails_at_start_naming_its_variable(
    env: dict[str, str], starts: str, hint: str
) -> None:
    error = refused(lambda: WorkerConfig.load({"DATABASE_URL": PG, **env}))
    assert isinstance(error, ConfigInvalidError)
    assert error.message.startswith(starts), error.message
    assert error.meta["variable"] == starts.split(":")[0]
    if hint:
        assert f"did you mean {hint}?" in error.message


def test_a_bad_database_url_is_shown_without_its_password() -> None:
    error = refused(lambda: WorkerConfig.load({"DATABASE_URL": "mysql://root:hunter2@db/x"}))
    assert error.message.startswith("DATABASE_URL: scheme 'mysql'")
    assert "hunter2" not in str(error)
    assert "hunter2" not in repr(error.meta)


def test_a_missing_backend_is_driver_unavailable_naming_the_variable() -> None:
    error = refused(lambda: WorkerConfig.load({}))
    assert isinstance(error, DriverUnavailableError)
    assert error.meta == {"variable": "DATABASE_URL"}
    error = refused(lambda: WorkerConfig.load({"UJOBS_DRIVER": "redis", "DATABASE_URL": PG}))
    assert error.meta == {"variable": "REDIS_URL"}
    # The scheduler always needs Postgres, whatever the queue's driver.
    error = refused(
        lambda: SchedulerConfig.load({"UJOBS_DRIVER": "redis", "REDIS_URL": "redis://r"})
    )
    assert error.meta == {"variable": "DATABASE_URL"}


def test_the_repr_never_shows_a_password() -> None:
    config = ApiConfig.load(
        {"DATABASE_URL": PG, "REDIS_URL": "redis://:r3dis@cache/0", "NATS_URL": "nats://u:n4ts@n"}
    )
    shown = repr(config)
    for secret in ("s3cret", "r3dis", "n4ts"):
        assert secret not in shown
    assert "db.internal" in shown
    assert config.common.connections.public()["database"] == (
        "postgresql://app:***@db.internal:5432/app"
    )


def test_api_port_and_host() -> None:
    config = ApiConfig.load({"DATABASE_URL": PG, "UJOBS_API_PORT": "9000"}, host="0.0.0.0")
    assert (config.host, config.port) == ("0.0.0.0", 9000)
    error = refused(lambda: ApiConfig.load({"DATABASE_URL": PG, "UJOBS_API_PORT": "70000"}))
    assert error.message.startswith("UJOBS_API_PORT: 70000 is not a TCP port")


def test_settlement_results_name_jobs_or_every_job() -> None:
    assert ApiConfig.load({"DATABASE_URL": PG}).nats_settlement_results == ()
    named = ApiConfig.load({"DATABASE_URL": PG, "UJOBS_NATS_SETTLEMENT_RESULTS": "a, b,a"})
    assert named.nats_settlement_results == ("a", "b")
    every = ApiConfig.load({"DATABASE_URL": PG, "UJOBS_NATS_SETTLEMENT_RESULTS": "*"})
    assert every.nats_settlement_results == ("*",)
    for bad in ("a,,b", "*,a", "x" * 201):
        error = refused(
            lambda bad=bad: ApiConfig.load(
                {"DATABASE_URL": PG, "UJOBS_NATS_SETTLEMENT_RESULTS": bad}
            )
        )
        assert error.message.startswith("UJOBS_NATS_SETTLEMENT_RESULTS:")


def test_operator_commands_take_the_database_from_a_flag() -> None:
    config = OperatorConfig.load({}, database_url=PG)
    assert config.common.connections.database_url == PG
    error = refused(lambda: OperatorConfig.load({}, database_url="nope"))
    assert error.message.startswith("--database-url / DATABASE_URL:")


def test_blank_values_are_unset() -> None:
    common = read_common({"UJOBS_APP": "", "REDIS_URL": "  "}, "cli")
    assert common.app is None
    assert common.connections.redis_url is None


def test_every_variable_is_documented() -> None:
    for variable in VARIABLES.values():
        assert variable.help
        assert variable.default
        assert variable.services
        assert variable.name == variable.name.upper()


def test_the_client_variables_the_docs_export_start_every_service() -> None:
    """The "Enqueue from any language" guide exports UJOBS_URL and UJOBS_TOKEN: every service
    and operator command starts with them set (the operator CLI reads them when DATABASE_URL
    is unset: tests/e2e/test_remote_cli.py)."""
    client = {"UJOBS_URL": "http://127.0.0.1:8080", "UJOBS_TOKEN": "ujobs_x"}
    assert WorkerConfig.load({"DATABASE_URL": PG, **client}).common.connections.database_url
    assert ApiConfig.load({"DATABASE_URL": PG, **client}).common.service == "api"
    assert SchedulerConfig.load({"DATABASE_URL": PG, **client}).common.service == "scheduler"
    assert OperatorConfig.load({"DATABASE_URL": PG, **client}).common.service == "cli"


def test_the_webhook_allow_variables_name_every_process_that_checks_them() -> None:
    """The api and ujobs dev refuse a loopback http:// endpoint at registration as the
    deliverer refuses it at delivery: the table (and each --help) names all of them."""
    for name in ("UJOBS_WEBHOOK_ALLOW_HTTP", "UJOBS_WEBHOOK_ALLOW_PRIVATE"):
        variable = VARIABLES[name]
        assert {"api", "dev", "webhook-deliverer", "webhooks commands"} <= set(variable.services)
        assert "registration" in variable.help or "registered" in variable.help
        for service in ("api", "dev", "webhook-deliverer"):
            assert name in reads(service), service
