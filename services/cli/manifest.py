"""``ujobs manifest``: every job and task descriptor of an app, as JSON."""

from __future__ import annotations

from ujobs.services.cli.common import AppOption, JsonOption
from ujobs.services.config.settings import environment
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.output import emit_json, reported


def manifest_command(app_spec: AppOption = None, as_json: JsonOption = False) -> None:
    """Print every job and task descriptor (with each job's input JSON Schema) as JSON.

    The manifest is always JSON; --json also prints a failure as JSON on stdout.
    """
    with reported(as_json=as_json):
        spec = app_spec if app_spec is not None else environment().get("UJOBS_APP") or None
        document = load_api(spec).manifest()
    emit_json(document)
