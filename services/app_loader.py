"""Find the app's ``Api`` from ``--app module:attribute`` (or ``UJOBS_APP``)."""

from __future__ import annotations

import importlib
import sys

from shared.errors import ConfigInvalidError
from shared.registry import Api, Registry, registry


def load_api(spec: str | None) -> Registry:
    """The registry for ``module:attribute`` (an ``Api``); None answers the process registry."""
    if not spec:
        return registry()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigInvalidError(
            f"UJOBS_APP / --app must be 'module:attribute' (the value define_api returned), "
            f"got {spec!r}",
            meta={"variable": "UJOBS_APP"},
        )
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigInvalidError(
            f"UJOBS_APP: cannot import {module_name!r} ({exc}); is it on PYTHONPATH?",
            meta={"variable": "UJOBS_APP"},
        ) from None
    api = getattr(module, attr, None)
    if not isinstance(api, Api):
        raise ConfigInvalidError(
            f"UJOBS_APP: {spec!r} is not the Api define_api() returned",
            meta={"variable": "UJOBS_APP"},
        )
    return api.registry()
