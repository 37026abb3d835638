"""The dashboard's moves: one ``POST /_x/act`` form, confirmed on a page of its own, then run
through the operator function the CLI and ``/v1`` call, and written to the log as an audit line
(``ujobs.dashboard.action``: the action, its target, the token and its tenant).

| ``action`` | Calls | Needs |
|---|---|---|
| ``retry`` · ``retry-from-step`` (``step``) | ``retry_job`` | ``operate``; a job this token sees |
| ``cancel`` | ``cancel_job`` | ``operate``; a job this token sees |
| ``promote`` | ``promote_job`` | ``operate``; a job this token sees |
| ``remove`` | ``remove_job`` (delete; a running job is refused) | ``operate``; a job this token sees |
| ``queue-pause`` · ``queue-resume`` | ``pause_queues`` | ``operate``, an operator token |
| ``task-pause`` · ``task-resume`` | ``pause_tasks`` | ``operate``, an operator token |
| ``endpoint-disable`` · ``-enable`` | the webhook store's ``disable`` · ``enable`` | ``operate``; an endpoint it sees |

``POST /_x/act-many`` is the lists' bulk form: ``retry``, ``cancel`` or ``remove`` on the
selected ``ids`` (at most ``MAX_BULK``, one page), each through the same function and the same
tenancy check as one job (another tenant's id is counted as not moved, like an unknown one).

A form without ``confirm=yes`` answers the confirmation page; every form carries the CSRF
token (``ujobs.services.dashboard.session``).
"""  # noqa: E501

from __future__ import annotations

import logging

from aiohttp import web
from yarl import URL

from ujobs.errors import InputInvalidError, UltimateError
from ujobs.introspect import (
    cancel_job,
    pause_queues,
    pause_tasks,
    promote_job,
    remove_job,
    retry_job,
)
from ujobs.jobs.declaration_rules import NAME_PATTERN
from ujobs.limits import MAX_RUN_ID_BYTES
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import EDGE, REGISTRY
from ujobs.services.api.queues import TaskUnknownError
from ujobs.services.dashboard.pages import visible_job
from ujobs.services.dashboard.pages_webhooks import set_endpoint_state
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, check_csrf, safe_next, viewer
from ujobs.services.dashboard.views import guarded

log = logging.getLogger("ujobs.dashboard")

routes = web.RouteTableDef()

QUESTIONS = {
    "retry": ("Re-queue job {target} with a fresh attempt budget?", "Retry"),
    "retry-from-step": (
        "Re-queue job {target}, dropping step {step!r} and every step saved after it?",
        "Retry from step",
    ),
    "cancel": (
        "Cancel job {target}? A running job's worker stops at its next heartbeat.",
        "Cancel job",
    ),
    "promote": ("Run job {target} now instead of at its scheduled time?", "Run now"),
    "remove": ("Delete job {target} and its saved steps? This cannot be undone.", "Delete job"),
    "queue-pause": ("Pause queue {target!r}? Workers stop claiming from it.", "Pause queue"),
    "queue-resume": ("Resume queue {target!r}?", "Resume queue"),
    "task-pause": (
        "Pause task {target!r}? Its occurrences are not fired while paused.",
        "Pause task",
    ),
    "task-resume": ("Resume task {target!r}?", "Resume task"),
    "endpoint-disable": (
        "Disable webhook endpoint {target}? Nothing is delivered to it until it is enabled; "
        "its events are kept.",
        "Disable endpoint",
    ),
    "endpoint-enable": (
        "Enable webhook endpoint {target}? New deliveries go to it again; "
        "`ujobs webhooks redeliver` sends what it missed.",
        "Enable endpoint",
    ),
}


def _invalid(field: str, message: str) -> InputInvalidError:
    return InputInvalidError(message, meta={"issues": [{"path": field, "message": message}]})


async def perform(
    request: web.Request, principal: Principal, action: str, target: str, step: str
) -> None:
    driver = request.app[EDGE].driver
    if action.startswith("queue-"):
        principal.require_operator("pausing a queue")
        if not NAME_PATTERN.fullmatch(target):
            raise _invalid("target", f"queue name {target!r} is not a queue name")
        await pause_queues(driver, [target], pause=action == "queue-pause")
    elif action.startswith("task-"):
        principal.require_operator("pausing a task")
        if target not in request.app[REGISTRY].tasks:
            raise TaskUnknownError(
                f"no task is named {target!r} in this app; the tasks page lists them",
                meta={"task": target},
            )
        await pause_tasks(driver, [target], pause=action == "task-pause")
    elif action.startswith("endpoint-"):
        await set_endpoint_state(request, principal, target, enabled=action == "endpoint-enable")
    else:
        row = await visible_job(request, principal, target)
        if action == "retry":
            await retry_job(driver, row.id)
        elif action == "retry-from-step":
            await retry_job(driver, row.id, from_step=step)
        elif action == "cancel":
            await cancel_job(driver, row.id, f"from the dashboard by token {principal.token_id}")
        elif action == "remove":
            await remove_job(driver, row.id)
        else:
            await promote_job(driver, row.id)


@routes.post(PREFIX + "/act")
@guarded
async def act(request: web.Request) -> web.StreamResponse:
    principal, secret = await viewer(request)
    form = {k: str(v) for k, v in (await request.post()).items()}
    check_csrf(request, form, secret)
    principal.require("operate")
    action, target, step = form.get("action", ""), form.get("target", ""), form.get("step", "")
    if action not in QUESTIONS:
        raise _invalid("action", f"unknown action {action!r}; one of {', '.join(QUESTIONS)}")
    if not target:
        raise _invalid("target", "the form names no target")
    if action == "retry-from-step" and not step:
        raise _invalid("step", "retry from step needs the step's name")
    back = safe_next(form.get("back"))
    if form.get("confirm") != "yes":
        question, label = QUESTIONS[action]
        return page(
            request,
            "confirm.html",
            principal=principal,
            secret=secret,
            question=question.format(target=target, step=step),
            label=label,
            form={"action": action, "target": target, "step": step, "back": back},
        )
    await perform(request, principal, action, target, step)
    log.info(
        "ujobs.dashboard.action",
        extra={
            "action": action,
            "target": target,
            "step": step or None,
            "token": principal.token_id,
            "tenant": principal.tenant_id,
        },
    )
    raise web.HTTPSeeOther(str(URL(back).update_query(done=action)))


MAX_BULK = 100
"""The most jobs one bulk form moves: a page of the lists."""

BULK_QUESTIONS = {
    "retry": ("Re-queue {n} selected jobs, each with a fresh attempt budget?", "Retry {n} jobs"),
    "cancel": (
        "Cancel {n} selected jobs? A running job's worker stops at its next heartbeat.",
        "Cancel {n} jobs",
    ),
    "remove": (
        "Delete {n} selected jobs and their saved steps? A running job is left as it is.",
        "Delete {n} jobs",
    ),
}


def _selected(posted: object) -> list[str]:
    """The form's ``ids``, each once, in the order sent; bounded in count and length."""
    getall = getattr(posted, "getall")  # noqa: B009 - aiohttp's MultiDictProxy
    ids = list(dict.fromkeys(str(v) for v in getall("ids", [])))
    if not ids:
        raise _invalid("ids", "select at least one job first")
    if len(ids) > MAX_BULK:
        raise _invalid("ids", f"at most {MAX_BULK} jobs at once; {len(ids)} were selected")
    too_long = [i for i in ids if len(i.encode()) > MAX_RUN_ID_BYTES]
    if too_long:
        raise _invalid("ids", f"an id is longer than {MAX_RUN_ID_BYTES} bytes")
    return ids


@routes.post(PREFIX + "/act-many")
@guarded
async def act_many(request: web.Request) -> web.StreamResponse:
    principal, secret = await viewer(request)
    posted = await request.post()
    form = {k: str(v) for k, v in posted.items()}
    check_csrf(request, form, secret)
    principal.require("operate")
    action = form.get("action", "")
    if action not in BULK_QUESTIONS:
        raise _invalid("action", f"unknown bulk action {action!r}; one of retry, cancel, remove")
    ids = _selected(posted)
    back = safe_next(form.get("back"))
    if form.get("confirm") != "yes":
        question, label = BULK_QUESTIONS[action]
        return page(
            request,
            "confirm_many.html",
            principal=principal,
            secret=secret,
            question=question.format(n=len(ids)),
            label=label.format(n=len(ids)),
            form={"action": action, "back": back},
            ids=ids,
        )
    moved: list[str] = []
    refused: dict[str, int] = {}
    for job_id in ids:
        try:
            await perform(request, principal, action, job_id, "")
        except UltimateError as exc:
            refused[exc.code] = refused.get(exc.code, 0) + 1
        else:
            moved.append(job_id)
    log.info(
        "ujobs.dashboard.action",
        extra={
            "action": f"{action}-many",
            "target": ",".join(moved),
            "step": None,
            "token": principal.token_id,
            "tenant": principal.tenant_id,
            "refused": refused,
        },
    )
    query = {"done": f"{action}-many", "moved": str(len(moved))}
    if refused:
        query |= {"refused": str(sum(refused.values())), "codes": ",".join(sorted(refused))}
    raise web.HTTPSeeOther(str(URL(back).update_query(query)))


__all__ = ["BULK_QUESTIONS", "MAX_BULK", "QUESTIONS", "act_many", "perform", "routes"]
