"""Find the app's ``Api`` from ``--app module:attribute`` (or ``UJOBS_APP``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from ujobs.errors import ConfigInvalidError, UltimateError
from ujobs.jobs.registry import Api, Registry, registry

# Our own top-level packages: an app package of one of these names is never the one imported.
OUR_PACKAGES = ("shared", "services", "webhooks", "exports")


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
    shadowed = shadowing_package(module_name)
    if shadowed is not None:
        top = module_name.split(".")[0]
        raise ConfigInvalidError(
            f"UJOBS_APP / --app: your app's top-level package {top!r} ({shadowed}) is named like "
            f"one of ultimate-jobs' own packages ({', '.join(OUR_PACKAGES)}), so Python imports "
            f"ours instead of yours; rename your package (e.g. 'myapp') and point --app at it",
            meta={"variable": "UJOBS_APP", "app": spec, "package": top},
        )
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


def shadowing_package(module_name: str) -> Path | None:
    """The user's own package or module on ``sys.path`` that ``module_name``'s top level names,
    when that name is one of ``OUR_PACKAGES`` and the folder is not ours; None otherwise."""
    top = module_name.split(".")[0]
    if top not in OUR_PACKAGES:
        return None
    spec = importlib.util.find_spec(top)
    ours = (
        {Path(p).resolve() for p in spec.submodule_search_locations}
        if spec is not None and spec.submodule_search_locations is not None
        else set()
    )
    for entry in sys.path:
        base = Path(entry or ".").resolve()
        for candidate in (base / top, base / f"{top}.py"):
            if candidate.exists() and candidate.resolve() not in ours:
                if candidate.is_dir() and not any(candidate.glob("*.py")):
                    continue  # a folder with no Python in it is not a package anyone imports
                return candidate
    return None
