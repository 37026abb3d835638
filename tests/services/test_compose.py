"""compose.yaml and the Dockerfile agree with the code (no Docker engine needed): every
service command is a real ``ujobs`` subcommand with real options, every variable is one the
config reads (and its value parses), every service waits for the one-shot migrate, and every
drain budget sits under its stop_grace_period."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML)

from services.cli import app
from services.config import (
    ApiConfig,
    RelayConfig,
    SchedulerConfig,
    WorkerConfig,
    read_common,
)
from services.config_vars import VARIABLES
from services.exporter import exporter_config
from services.webhook_deliverer import webhook_deliverer_config, webhook_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
IMAGE = "ultimate-jobs:local"
OURS = {name: s for name, s in SERVICES.items() if s.get("image") == IMAGE}
LONG_RUNNING = sorted(set(OURS) - {"migrate"})


def _interpolate(value: Any) -> str:
    """compose's ``${VAR:-default}`` with nothing set: the default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {k: _interpolate(v) for k, v in (service.get("environment") or {}).items()}


def _seconds(duration: str) -> float:
    parts = re.findall(r"(\d+)(ms|s|m|h)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * scale[u] for n, u in parts)


def test_the_image_runs_every_service() -> None:
    assert set(OURS) == {
        "migrate", "api", "relay", "worker", "scheduler", "webhook-deliverer", "exporter",
    }  # fmt: skip
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert 'ENTRYPOINT ["ujobs"]' in dockerfile


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_command_is_a_real_ujobs_subcommand(name: str) -> None:
    args = list(OURS[name]["command"])
    command: Any = typer.main.get_command(app)
    path = []
    while hasattr(command, "commands") and args and args[0] in command.commands:
        path.append(args.pop(0))
        command = command.commands[path[-1]]
    assert not hasattr(command, "commands"), f"{name}: {path} is a group, not a command"
    assert path, f"{name}: {OURS[name]['command']} names no ujobs command"
    command.make_context(" ".join(["ujobs", *path]), args)  # unknown options raise here


@pytest.mark.parametrize("name", sorted(OURS))
def test_every_variable_is_one_the_config_reads_and_parses(name: str) -> None:
    env = _env(OURS[name])
    unknown = set(env) - set(VARIABLES)
    assert not unknown, f"{name} sets variables no service reads: {unknown}"
    loaders: dict[str, Callable[[], object]] = {
        "migrate": lambda: read_common(env, "db migrate"),
        "api": lambda: ApiConfig.load(env),
        "relay": lambda: RelayConfig.load(env),
        "worker": lambda: WorkerConfig.load(env),
        "scheduler": lambda: SchedulerConfig.load(env),
        "webhook-deliverer": lambda: (webhook_deliverer_config(env), webhook_settings(env)),
        "exporter": lambda: exporter_config(env),
    }
    loaders[name]()


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_service_waits_for_migrate_and_outlives_its_drain(name: str) -> None:
    service = OURS[name]
    assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    budget_s = int(_env(service)["UJOBS_DRAIN_DEADLINE_MS"]) / 1000
    assert _seconds(service["stop_grace_period"]) > budget_s


def test_the_backends_have_health_checks_and_migrate_waits_for_postgres() -> None:
    for backend in ("postgres", "redis", "nats"):
        assert SERVICES[backend]["healthcheck"]["test"]
    assert "-js" in SERVICES["nats"]["command"]
    migrate = SERVICES["migrate"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate["restart"] == "no"
