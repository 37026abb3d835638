"""``parentId`` on a single enqueue (``POST /v1/jobs/{name}``, the NATS request): the new job
is recorded as a child of an existing one, as ``run.step.enqueue`` records it, so a workflow
driven from another language shows its tree, and a cancel of the parent reaches it.

| Rule | Answer |
|---|---|
| only an operator token may name a parent: a parent is any job of any tenant | 403 ``X_FORBIDDEN`` |
| a parent that does not exist | 404 ``X_JOB_NOT_FOUND`` |
| the child runs under its parent's tenant; an input naming another one | 403 ``X_JOB_TENANT_MISMATCH`` |
| a driver that keeps no children (Redis) | 501 ``X_DRIVER_UNSUPPORTED`` |
| ``parentId`` not a string, or past ``ujobs.limits`` | 400 ``X_INPUT_INVALID`` |
"""  # noqa: E501

from __future__ import annotations

import dataclasses
from typing import Any, cast

from ujobs.drivers.base import (
    AnnouncesEnqueues,
    Enqueued,
    EnqueueRequest,
    JobDriver,
    announces_enqueues,
    require_introspection,
)
from ujobs.drivers.children import children_of
from ujobs.errors import (
    DriverUnsupportedError,
    InputInvalidError,
    JobNotFoundError,
    JobTenantMismatchError,
)
from ujobs.limits import check_text
from ujobs.services.api.auth import Principal


def parent_of(body: dict[str, Any], principal: Principal) -> str | None:
    """``parentId``: the job to record as the new one's parent (a child, as
    ``run.step.enqueue`` makes it). Only an operator token may name one (403 ``X_FORBIDDEN``):
    a parent is any job of any tenant, and the child takes its parent's tenant."""
    parent_id = body.get("parentId")
    if parent_id is None:
        return None
    if not isinstance(parent_id, str):
        raise InputInvalidError(
            "parentId must be a job id",
            meta={"issues": [{"path": "parentId", "message": "string"}]},
        )
    check_text("parentId", parent_id)
    principal.require_operator("naming a parentId")
    return parent_id


async def enqueue_under(driver: JobDriver, req: EnqueueRequest, parent_id: str) -> Enqueued:
    """``req`` enqueued as a child of ``parent_id``, under the parent's tenant: 404
    ``X_JOB_NOT_FOUND`` when there is no such job, 403 ``X_JOB_TENANT_MISMATCH`` when the input
    names another tenant, 501 ``X_DRIVER_UNSUPPORTED`` on a driver that keeps no children."""
    children = children_of(driver)
    if children is None:
        raise DriverUnsupportedError(
            f"the {driver.name} driver keeps no children: parentId needs Postgres",
            meta={"driver": driver.name, "capability": "children"},
        )
    parent = await require_introspection(driver).get(parent_id)
    answer = None
    if parent is not None:
        tenant = parent.tenant_id
        if tenant is not None and req.tenant_id not in (None, tenant):
            raise JobTenantMismatchError(
                f"job {req.name!r}: its input names tenant {req.tenant_id!r} but its parent "
                f"{parent_id!r} is {tenant!r}'s; a child runs under its parent's tenant",
                meta={"job": req.name, "tenant": req.tenant_id, "parent": parent_id},
            )
        if tenant is not None:
            req = dataclasses.replace(req, tenant_id=tenant)
        answer = await children.enqueue(req, parent_id=parent_id, detached=False)
    if answer is None:
        raise JobNotFoundError(f"no job has the id {parent_id!r}", meta={"id": parent_id})
    if not answer.deduped and announces_enqueues(driver):
        cast(AnnouncesEnqueues, driver).announce(req.queue)
    return answer


__all__ = ["enqueue_under", "parent_of"]
