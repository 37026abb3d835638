"""``define_api()``: the one way an app hands its jobs and tasks to the system.

A job name is the durable queue key that queued, retrying and dead-lettered rows carry, so two
things on one name are refused at the earliest point it is decidable: two explicit ``name=`` at
``job()``; two different handles under one name, or one handle exported under two names, here.
The same handle reached twice (a module passed twice, or imported by a sibling) is one
registration seen twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from shared.definitions import JobHandle
from shared.errors import InvariantError, JobDuplicateError
from shared.tasks import TaskHandle

Namespace = ModuleType | object


@dataclass
class Registry:
    """Name -> handle, for jobs and for tasks; what workers and the manifest read."""

    jobs: dict[str, JobHandle[Any]] = field(default_factory=dict)
    tasks: dict[str, TaskHandle] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def register_job(self, handle: JobHandle[Any]) -> None:
        with self._lock:
            known = self.jobs.get(handle.name)
            if known is not None and known is not handle:
                raise JobDuplicateError(
                    f"two different jobs are registered under the name {handle.name!r}; a job "
                    "name is its durable queue key — give one of them name=",
                    meta={"name": handle.name},
                )
            self.jobs[handle.name] = handle

    def register_task(self, handle: TaskHandle) -> None:
        with self._lock:
            known = self.tasks.get(handle.name)
            if known is not None and known is not handle:
                raise JobDuplicateError(
                    f"two different tasks are registered under the name {handle.name!r}",
                    meta={"name": handle.name},
                )
            self.tasks[handle.name] = handle

    def job(self, name: str) -> JobHandle[Any] | None:
        return self.jobs.get(name)

    def merge(self, other: Registry) -> None:
        for handle in other.jobs.values():
            self.register_job(handle)
        for task_handle in other.tasks.values():
            self.register_task(task_handle)

    def manifest(self) -> dict[str, Any]:
        """Every job and task descriptor, sorted by name (``ujobs manifest``)."""
        return {
            "jobs": [self.jobs[n].describe() for n in sorted(self.jobs)],
            "tasks": [self.tasks[n].describe() for n in sorted(self.tasks)],
        }

    def clear(self) -> None:
        with self._lock:
            self.jobs.clear()
            self.tasks.clear()


_global = Registry()


def registry() -> Registry:
    """The process's registry: everything ``define_api`` was handed."""
    return _global


def reset_registry() -> None:
    """Test seam."""
    _global.clear()


@dataclass(frozen=True)
class Api:
    """What ``define_api`` answers: the app's jobs and tasks by name."""

    jobs: Mapping[str, JobHandle[Any]]
    tasks: Mapping[str, TaskHandle]

    def registry(self) -> Registry:
        reg = Registry()
        for handle in self.jobs.values():
            reg.register_job(handle)
        for task_handle in self.tasks.values():
            reg.register_task(task_handle)
        return reg

    def manifest(self) -> dict[str, Any]:
        return self.registry().manifest()


def _exports(namespace: Namespace, kind: type[Any]) -> Iterable[tuple[str, Any]]:
    if isinstance(namespace, str | bytes):
        raise InvariantError(
            "define_api takes module namespaces (import jobs; define_api(jobs=[jobs])), never "
            "names as strings"
        )
    items = vars(namespace).items() if hasattr(namespace, "__dict__") else ()
    return [(attr, value) for attr, value in items if isinstance(value, kind)]


def _home_module(namespace: Namespace) -> str | None:
    if isinstance(namespace, ModuleType):
        return namespace.__name__
    return getattr(namespace, "__module__", None)


def _collect(namespaces: Sequence[Namespace], kind: type[Any]) -> list[Any]:
    """Handles defined in each namespace (name stamped from the export) and ones it imported."""
    found: list[Any] = []
    for namespace in namespaces:
        home = _home_module(namespace)
        exported_as: dict[int, str] = {}
        for attr, handle in _exports(namespace, kind):
            if attr.startswith("_"):
                continue
            defined_here = handle.module == home
            if defined_here:
                first = exported_as.get(id(handle))
                if first is not None:
                    raise JobDuplicateError(
                        f"{handle.name!r} is exported twice ({first!r} and {attr!r}); the second "
                        "name would move its queue key — export it once",
                        meta={"name": handle.name, "exports": [first, attr]},
                    )
                exported_as[id(handle)] = attr
                handle.stamp_name(attr)
            found.append(handle)
    return found


def define_api(
    *, jobs: Sequence[Namespace] = (), tasks: Sequence[Namespace] = (), install: bool = True
) -> Api:
    """Register the app's job and task modules; answers the ``Api`` the services load.

    ``install=False`` builds the ``Api`` without touching the process registry (tests).
    """
    reg = Registry()
    for handle in _collect(jobs, JobHandle):
        reg.register_job(handle)
    for task_handle in _collect(tasks, TaskHandle):
        reg.register_task(task_handle)
        for job_handle, _ in task_handle.entries(0):
            reg.register_job(job_handle)
    if install:
        _global.merge(reg)
    return Api(jobs=dict(reg.jobs), tasks=dict(reg.tasks))
