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

from ujobs.exports.sinks import reset_default_sink, sink_from_url
from ujobs.services.cli.app import app
from ujobs.services.config.settings import (
    ApiConfig,
    RelayConfig,
    SchedulerConfig,
    WorkerConfig,
    read_common,
)
from ujobs.services.config.variables import VARIABLES
from ujobs.services.exporter import ExportSettings, exporter_config
from ujobs.services.runtime.secret_key import write_key_file
from ujobs.services.webhook_deliverer import webhook_deliverer_config, webhook_settings
from ujobs.webhooks.store_pg import new_secret_key

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
IMAGE = "${UJOBS_IMAGE:-ultimate-jobs:local}"
"""One variable names the image of every service: an app's derived image is one line."""
OURS = {name: s for name, s in SERVICES.items() if s.get("image") == IMAGE}
ONE_SHOT = {"migrate", "keygen"}
LONG_RUNNING = sorted(set(OURS) - ONE_SHOT)
KEY_FILE = "/run/ujobs-key/secret-key"


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
        "migrate", "keygen", "api", "relay", "worker", "scheduler", "webhook-deliverer",
        "exporter",
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
def test_every_variable_is_one_the_config_reads_and_parses(name: str, tmp_path: Path) -> None:
    env = _env(OURS[name])
    if env.get("UJOBS_SECRET_KEY_FILE") == KEY_FILE:  # the file keygen writes, here
        key_file = tmp_path / "secret-key"
        write_key_file(key_file, new_secret_key())
        env["UJOBS_SECRET_KEY_FILE"] = str(key_file)
    unknown = set(env) - set(VARIABLES)
    assert not unknown, f"{name} sets variables no service reads: {unknown}"
    loaders: dict[str, Callable[[], object]] = {
        "migrate": lambda: read_common(env, "db migrate"),
        "keygen": lambda: None,
        "api": lambda: ApiConfig.load(env),
        "relay": lambda: RelayConfig.load(env),
        "worker": lambda: WorkerConfig.load(env),
        "scheduler": lambda: SchedulerConfig.load(env),
        "webhook-deliverer": lambda: (webhook_deliverer_config(env), webhook_settings(env)),
        # The exporter opens its store: the container's path, here under tmp_path.
        "exporter": lambda: exporter_config({**env, "UJOBS_EXPORT_URL": str(tmp_path)}),
    }
    try:
        loaders[name]()
    finally:
        reset_default_sink()


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


def test_the_redis_the_queue_may_live_in_keeps_an_append_only_file_on_a_volume() -> None:
    """With UJOBS_DRIVER=redis the queue lives in compose's Redis: a restart without
    persistence would delete every job (README: Redis durability)."""
    redis = SERVICES["redis"]
    command = list(redis["command"])
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert command[0] == "redis-server"
    assert options["--appendonly"] == "yes"
    assert options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    assert any(v.split(":")[1] == "/data" for v in redis["volumes"])
    assert redis["volumes"][0].split(":")[0] in COMPOSE["volumes"]
    for name in LONG_RUNNING:
        assert _env(OURS[name])["REDIS_URL"] == "redis://redis:6379/0"


@pytest.mark.parametrize("name", sorted(set(LONG_RUNNING) - {"api"}))
def test_every_service_without_an_api_exposes_its_metrics_endpoint(name: str) -> None:
    service = OURS[name]
    env = _env(service)
    port = env["UJOBS_METRICS_PORT"]
    assert env["UJOBS_METRICS_HOST"] == "0.0.0.0"
    assert port in [str(p) for p in service["expose"]]
    probe = " ".join(service["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/readyz" in probe


def test_the_image_is_built_once_and_reused_by_tag() -> None:
    builders = [name for name, service in OURS.items() if "build" in service]
    assert builders == ["migrate"]
    for name in LONG_RUNNING:
        assert OURS[name]["pull_policy"] == "never", name  # the tag migrate built


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", ".ujobs", ".git"} <= ignored
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    for copied in re.findall(r"^COPY (.+) \./?\S*$", dockerfile, flags=re.M):
        for path in copied.split():
            assert path not in ignored, f"the Dockerfile copies {path}, which is ignored"


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_service_runs_in_the_mounted_app_directory(name: str) -> None:
    service = OURS[name]
    [volume] = [v for v in service["volumes"] if v.startswith("${UJOBS_APP_DIR")]
    source, target, mode = volume.rsplit(":", 2)
    assert source == "${UJOBS_APP_DIR:-.}"
    assert (target, mode) == (service["working_dir"], "ro")
    assert f"WORKDIR {target}" in (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _mounts(service: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A service's mounts: target path -> (source, mode)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *mode = _interpolate(volume).split(":")
        mounts[target] = (source, mode[0] if mode else "rw")
    return mounts


def test_the_api_serves_exports_from_the_volume_the_exporter_writes_to() -> None:
    """The api answers a part's signed link by reading the file the exporter wrote: both
    must see one place, or every download of a finished export is a 404."""
    api, exporter = OURS["api"], OURS["exporter"]
    # The key file is keygen's, absent here; where the parts live does not depend on it.
    urls = {
        name: ExportSettings.load({**_env(OURS[name]), "UJOBS_SECRET_KEY_FILE": ""}).url
        for name in ("api", "exporter")
    }
    assert urls["api"] == urls["exporter"]
    path = urls["api"]
    assert path is not None
    assert path.startswith("/"), path
    api_source, _ = _mounts(api)[path]
    exporter_source, exporter_mode = _mounts(exporter)[path]
    assert api_source == exporter_source
    assert api_source in COMPOSE["volumes"], "a named volume, not a directory of the host"
    assert exporter_mode == "rw"
    # A new named volume takes the owner of the image's directory it is mounted over.
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    user = re.findall(r"^USER (\S+)$", dockerfile, flags=re.M)[-1]
    assert re.search(rf"mkdir -p [^\n]*{re.escape(path)}", dockerfile)
    assert re.search(rf"chown {user} {re.escape(path)}", dockerfile)


def test_the_api_signs_links_to_export_parts(tmp_path: Path) -> None:
    """Parts on the filesystem are served through links the api signs with the key keygen
    wrote (UJOBS_SECRET_KEY_FILE); without one a manifest answers no links at all."""
    env = _env(OURS["api"])
    assert env["UJOBS_SECRET_KEY_FILE"] == KEY_FILE
    key_file = tmp_path / "secret-key"  # the key volume, as keygen leaves it
    write_key_file(key_file, new_secret_key())
    settings = ExportSettings.load({**env, "UJOBS_SECRET_KEY_FILE": str(key_file)})
    assert settings.secret_key is not None


def test_the_commented_s3_alternative_is_a_working_export_store() -> None:
    """compose.yaml documents S3 as commented lines; uncommented, they must configure a
    store (they name no variable the services do not read but the store's own AWS_*)."""
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    lines = re.findall(r"^#   ([A-Z_]+: .*)$", text, flags=re.M)
    env = {k: str(v) for k, v in yaml.safe_load("\n".join(lines)).items()}
    assert env["UJOBS_EXPORT_URL"].startswith("s3://")
    assert {k for k in env if not k.startswith("AWS_")} <= set(VARIABLES)
    options = {"region": env["AWS_REGION"], "endpoint": env["AWS_ENDPOINT_URL"]}
    sink = sink_from_url(env["UJOBS_EXPORT_URL"], allow_http=True, **options)
    assert sink.signs_links


def test_no_secret_key_is_shipped_and_keygen_makes_the_one_the_services_read() -> None:
    """compose.yaml carries no key (a key in a public file seals nothing): the one-shot keygen
    writes one into a named volume, and every service that seals or signs reads that file,
    mounted read-only, after keygen has finished."""
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    assert "UJOBS_SECRET_KEY:" not in text
    keygen = OURS["keygen"]
    assert keygen["command"] == ["webhooks", "new-key", "--into", KEY_FILE]
    assert keygen["restart"] == "no"
    assert keygen["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    [key_volume] = keygen["volumes"]
    volume, mount = key_volume.split(":")
    assert volume in COMPOSE["volumes"]
    assert KEY_FILE.startswith(mount + "/")
    readers = {n for n, s in OURS.items() if "UJOBS_SECRET_KEY_FILE" in _env(s)}
    # The worker too: the operator CLI (webhooks commands included) works in every service.
    assert readers == {"api", "webhook-deliverer", "exporter", "worker"}
    for name in readers:
        service = OURS[name]
        assert _env(service)["UJOBS_SECRET_KEY_FILE"] == KEY_FILE
        assert f"{volume}:{mount}:ro" in service["volumes"], name
        assert service["depends_on"]["keygen"]["condition"] == "service_completed_successfully"
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert f"install -d -o ujobs -m 0700 {mount}" in dockerfile  # the volume's owner


def test_the_worker_serves_the_queues_the_shell_names_else_every_queue_the_app_names() -> None:
    worker = OURS["worker"]
    assert worker["command"] == ["worker"]  # no --queues: it would win over UJOBS_QUEUES
    assert worker["environment"]["UJOBS_QUEUES"] == "${UJOBS_QUEUES:-}"
    config = WorkerConfig.load({**_env(worker), "UJOBS_SECRET_KEY_FILE": ""})
    assert not config.queues_given  # empty: every queue the app's jobs name, at start
    named = WorkerConfig.load({**_env(worker), "UJOBS_QUEUES": "mail,reports"})
    assert named.queues == ("mail", "reports")


def test_every_image_is_one_variable_and_the_app_settings_file_is_optional() -> None:
    assert {name for name, s in SERVICES.items() if "ultimate-jobs" in str(s.get("image"))} == set(
        OURS
    )
    assert "UJOBS_IMAGE" in VARIABLES  # exported in a shell, it stops no ujobs command
    for name in LONG_RUNNING:
        [env_file] = OURS[name]["env_file"]
        assert env_file == {"path": "${UJOBS_APP_ENV:-app.env}", "required": False}, name
    assert {"UJOBS_APP_ENV", "UJOBS_APP_DIR"} <= set(VARIABLES)


@pytest.mark.parametrize("name", ["api", "webhook-deliverer"])
def test_the_webhook_allow_variables_pass_through_where_they_are_checked(name: str) -> None:
    """The api checks them at registration, the deliverer at delivery: a partner on the host
    needs both, from the shell, off by default."""
    environment = OURS[name]["environment"]
    assert environment["UJOBS_WEBHOOK_ALLOW_HTTP"] == "${UJOBS_WEBHOOK_ALLOW_HTTP:-0}"
    assert environment["UJOBS_WEBHOOK_ALLOW_PRIVATE"] == "${UJOBS_WEBHOOK_ALLOW_PRIVATE:-}"
    assert name in VARIABLES["UJOBS_WEBHOOK_ALLOW_HTTP"].services


def test_postgres_is_published_on_the_hosts_loopback_for_a_local_cli() -> None:
    [port] = SERVICES["postgres"]["ports"]
    assert port == "127.0.0.1:${POSTGRES_PORT:-5432}:5432"
    assert not any(k.startswith("UJOBS_") for k in re.findall(r"\$\{([A-Z_]+)", port))
