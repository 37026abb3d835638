"""Find the app's ``Api`` from ``--app module:attribute`` (or ``UJOBS_APP``)."""

from __future__ import annotations

import importlib
import sys

from ujobs.errors import ConfigInvalidError, UltimateError
from ujobs.jobs.registry import Api, Registry, registry


def load_api(spec: str | None) -> Registry:
    """The registry for ``module:attribute`` (an ``Api``); None answers the process registry."""
    if not spec:
        return registry()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigInvalidError(
            f"UJOBS_APP / --app must be 'module:attribute' (the value define_api returned), "
            f"e.g. 'myapp.jobs:api'; got {spec!r}",
            meta={"variable": "UJOBS_APP"},
        )
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except UltimateError:
        raise  # a declaration refused at import (X_JOB_DUPLICATE, ...) keeps its own code
    except ImportError as exc:
        raise ConfigInvalidError(
            f"UJOBS_APP / --app: cannot import {module_name!r} ({exc}); run from the app's "
            "directory or put it on PYTHONPATH",
            meta={"variable": "UJOBS_APP", "app": spec},
        ) from None
    except Exception as exc:
        raise ConfigInvalidError(
            f"UJOBS_APP / --app: importing {module_name!r} failed: {type(exc).__name__}: {exc}",
            meta={"variable": "UJOBS_APP", "app": spec},
        ) from exc
    api = getattr(module, attr, None)
    if not isinstance(api, Api):
        found = "nothing" if api is None else f"a {type(api).__name__}"
        raise ConfigInvalidError(
            f"UJOBS_APP / --app: {spec!r} is {found}, not the Api define_api() returned; "
            f"point it at the module attribute holding define_api(...)",
            meta={"variable": "UJOBS_APP", "app": spec},
        )
    return api.registry()
