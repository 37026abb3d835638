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

from ujobs.errors import InvariantError, JobDuplicateError
from ujobs.jobs.app_context import AppContext, checked_context
from ujobs.jobs.job import JobHandle, validate_name
from ujobs.jobs.task import TaskHandle

Namespace = ModuleType | object


@dataclass
class Registry:
    """Name -> handle, for jobs and for tasks; what workers and the manifest read. ``context``
    is the app's ``define_api(context=)`` factory (``ujobs.jobs.app_context``), if any."""

    jobs: dict[str, JobHandle[Any]] = field(default_factory=dict)
    tasks: dict[str, TaskHandle] = field(default_factory=dict)
    context: AppContext | None = None
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
        if other.context is not None:
            if self.context is not None and self.context is not other.context:
                raise InvariantError(
                    "two apps with different define_api(context=) factories in one registry; "
                    "a process opens one app context — give one app the resources of both"
                )
            self.context = other.context
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
    """What ``define_api`` answers: the app's jobs and tasks by name, and its ``context``
    factory (None: runs get ``run.ctx`` None)."""

    jobs: Mapping[str, JobHandle[Any]]
    tasks: Mapping[str, TaskHandle]
    context: AppContext | None = None

    def registry(self) -> Registry:
        reg = Registry(context=self.context)
        for handle in self.jobs.values():
            reg.register_job(handle)
        for task_handle in self.tasks.values():
            reg.register_task(task_handle)
        return reg

    def manifest(self) -> dict[str, Any]:
        return self.registry().manifest()


def _exports(namespace: Namespace, kind: type[Any]) -> Iterable[tuple[str, Any]]:
    if isinstance(namespace, str | bytes | JobHandle | TaskHandle) or not hasattr(
        namespace, "__dict__"
    ):
        raise InvariantError(
            "define_api takes module namespaces (import app.jobs as jobs; "
            f"define_api(jobs=[jobs])), never handles or names; got {namespace!r}"
        )
    return [(attr, value) for attr, value in vars(namespace).items() if isinstance(value, kind)]


def _namespaces(value: Any, field: str) -> Sequence[Namespace]:
    if isinstance(value, ModuleType | str | bytes) or not isinstance(value, Sequence):
        raise InvariantError(
            f"define_api({field}=...) takes a list of modules, e.g. {field}=[{field}_module]"
        )
    return value


def _home_module(namespace: Namespace) -> str | None:
    if isinstance(namespace, ModuleType):
        return namespace.__name__
    return getattr(namespace, "__module__", None)


def _plan(namespaces: Sequence[Namespace], kind: type[Any], noun: str) -> dict[str, Any]:
    """The name each handle will register under, checked before any handle is renamed.

    A handle found in the module that defined it takes the export name (unless it set
    ``name=``); one a module merely imported keeps the name its home gave it. One handle
    exported twice by its home, or two handles landing on one name, is ``X_JOB_DUPLICATE``.
    """
    stamps: dict[int, str] = {}
    handles: dict[int, Any] = {}
    for namespace in namespaces:
        home = _home_module(namespace)
        seen_here: dict[int, str] = {}
        for attr, handle in _exports(namespace, kind):
            if attr.startswith("_"):
                continue
            handles[id(handle)] = handle
            if handle.module != home:
                continue
            first = seen_here.get(id(handle))
            if first is not None and first != attr:
                raise JobDuplicateError(
                    f"{noun} {handle.name!r} is exported twice by {home} ({first!r} and "
                    f"{attr!r}); the second name would move its queue key — export it once",
                    meta={"name": handle.name, "exports": [first, attr]},
                )
            seen_here[id(handle)] = attr
            if not handle.explicit_name:
                stamps[id(handle)] = validate_name(attr, kind=noun)
    planned: dict[str, Any] = {}
    for key, handle in handles.items():
        name = stamps.get(key, handle.name)
        known = planned.get(name)
        if known is not None and known is not handle:
            raise JobDuplicateError(
                f"two different {noun}s are registered under the name {name!r}; a {noun} name "
                "is its durable queue key — give one of them name=",
                meta={"name": name},
            )
        planned[name] = handle
    for key, handle in handles.items():
        if key in stamps:
            handle.stamp_name(stamps[key])
    return planned


def define_api(
    *,
    jobs: Sequence[Namespace] = (),
    tasks: Sequence[Namespace] = (),
    context: AppContext | None = None,
    install: bool = True,
) -> Api:
    """Register the app's job and task modules; answers the ``Api`` the services load.

    Pass module objects (``import app.jobs as jobs; define_api(jobs=[jobs])``). Every collision
    is refused before any handle is renamed. ``context`` is a function answering an async
    context manager: each service that runs jobs enters it once at start, its value is
    ``run.ctx``, and it is exited after the drain (``ujobs.jobs.app_context``).
    ``install=False`` builds the ``Api`` without touching the process registry (tests).
    """
    factory = checked_context(context)
    reg = Registry()
    for handle in _plan(_namespaces(jobs, "jobs"), JobHandle, "job").values():
        reg.register_job(handle)
    for task_handle in _plan(_namespaces(tasks, "tasks"), TaskHandle, "task").values():
        reg.register_task(task_handle)
        for job_handle, _ in task_handle.entries(0):
            reg.register_job(job_handle)
    if install:
        _global.merge(reg)
    return Api(jobs=dict(reg.jobs), tasks=dict(reg.tasks), context=factory)
