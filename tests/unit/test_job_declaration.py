"""``job()``: the two forms, the required fields, and every declaration refused where written
(§ idempotencyKey / tenant are required, § One run per key, § The deadline cancels)."""

from __future__ import annotations

import gc
import math
from datetime import timedelta
from typing import Any

import pytest

from ujobs import KeyedConcurrency, Retry, Run, job, t, task
from ujobs.errors import (
    IdempotencyRequiredError,
    JobDeclarationInvalidError,
    JobDuplicateError,
    JobTenantRequiredError,
)
from ujobs.jobs.job import DEFAULT_EVENT_POLL_MS, JobHandle


async def body(run: Run[Any]) -> None:
    """Does the work."""


def declare(**overrides: Any) -> JobHandle[Any]:
    options: dict[str, Any] = {
        "name": "j",
        "run": body,
        "idempotency_key": lambda i: "k",
        "tenant": "none",
    }
    options.update(overrides)
    handle: JobHandle[Any] = job(**options)
    return handle


def refused(**overrides: Any) -> JobDeclarationInvalidError:
    with pytest.raises(JobDeclarationInvalidError) as info:
        declare(**overrides)
    assert info.value.code == "X_JOB_DECLARATION_INVALID"
    return info.value


# --- the two forms ---------------------------------------------------------------------------


def test_the_decorator_names_the_job_after_its_function() -> None:
    @job(input=t.object(org_id=t.uuid), idempotency_key=lambda i: i.org_id, tenant="none")
    async def onboard_org(run: Run[Any]) -> None:
        """Provision an org."""

    assert isinstance(onboard_org, JobHandle)
    assert onboard_org.name == "onboard_org"
    assert not onboard_org.explicit_name
    assert onboard_org.describe()["description"] == "Provision an org."


def test_the_decorator_keeps_an_explicit_name() -> None:
    @job(name="mail.send", idempotency_key=lambda i: "k", tenant="none")
    async def send(run: Run[Any]) -> None: ...

    assert send.name == "mail.send"
    assert send.explicit_name


def test_the_factory_needs_a_name() -> None:
    with pytest.raises(JobDeclarationInvalidError, match="name="):
        job(run=body, idempotency_key=lambda i: "k", tenant="none")
    assert declare(name="factory.made").name == "factory.made"


def test_the_decorator_refuses_a_body_that_is_not_async() -> None:
    with pytest.raises(JobDeclarationInvalidError, match="async def"):
        # Not async, on purpose.
        @job(idempotency_key=lambda i: "k", tenant="none")  # type: ignore[arg-type]
        def sync_body(run: Run[Any]) -> None: ...


@pytest.mark.parametrize("name", ["", "has space", "ünïcode", "x" * 201, 7])
def test_a_name_that_cannot_be_a_queue_key_is_refused(name: Any) -> None:
    refused(name=name)


# --- idempotency_key and tenant are required -------------------------------------------------


@pytest.mark.parametrize("missing", ["idempotency_key", "tenant"])
def test_omitting_a_required_field_is_a_type_error_in_both_forms(missing: str) -> None:
    options: dict[str, Any] = {"idempotency_key": lambda i: "k", "tenant": "none"}
    del options[missing]
    with pytest.raises(TypeError, match=missing):
        job(**options)
    with pytest.raises(TypeError, match=missing):
        job(name="x", run=body, **options)


def test_idempotency_key_none_is_x_idempotency_required() -> None:
    with pytest.raises(IdempotencyRequiredError) as info:
        declare(idempotency_key=None)
    assert info.value.code == "X_IDEMPOTENCY_REQUIRED"
    assert "have you already run" in info.value.message


def test_tenant_none_is_x_job_tenant_required() -> None:
    with pytest.raises(JobTenantRequiredError) as info:
        declare(tenant=None)
    assert info.value.code == "X_JOB_TENANT_REQUIRED"
    assert "tenant='none'" in info.value.message


def test_tenant_is_a_function_or_the_word_none() -> None:
    assert declare(tenant="none").describe()["tenant"] == "none"
    assert declare(tenant=lambda i: "org").describe()["tenant"] == "input"
    refused(tenant="acme")
    refused(tenant="")


@pytest.mark.parametrize("key", ["", 5])
def test_an_idempotency_key_that_is_not_a_function_or_a_string_is_refused(key: Any) -> None:
    refused(idempotency_key=key)


def test_a_constant_idempotency_key_is_a_singleton_job() -> None:
    assert declare(idempotency_key="nightly-rollup").request({}).idempotency_key == "nightly-rollup"


# --- § One run per key: refused where the job is declared ------------------------------------


def by_account(i: Any) -> str:
    return "acct"


@pytest.mark.parametrize(
    "concurrency",
    [0, -1, 1.5, math.nan, math.inf, -math.inf, True, "2", [1]],
    ids=repr,
)
def test_a_plain_cap_no_worker_can_honour_is_refused(concurrency: Any) -> None:
    error = refused(concurrency=concurrency)
    assert "concurrency" in error.message


@pytest.mark.parametrize("limit", [0, -1, 1.5, math.nan, math.inf, True, "1"], ids=repr)
def test_a_keyed_limit_no_worker_can_honour_is_refused(limit: Any) -> None:
    refused(concurrency={"key": by_account, "limit": limit})
    refused(concurrency=KeyedConcurrency(key=by_account, limit=limit))


def test_a_key_that_is_not_a_function_is_refused() -> None:
    refused(concurrency={"key": "account_id", "limit": 1})
    refused(concurrency=KeyedConcurrency(key="account_id"))  # type: ignore[arg-type]


@pytest.mark.parametrize("when_busy", ["drop", "queue", "", None, "FAIL"])
def test_when_busy_outside_the_two_is_refused(when_busy: Any) -> None:
    refused(concurrency={"key": by_account, "when_busy": when_busy})


def test_a_concurrency_table_with_unknown_or_missing_fields_is_refused() -> None:
    assert "whenBusy" in refused(concurrency={"key": by_account, "whenBusy": "fail"}).message
    assert "key" in refused(concurrency={"limit": 2}).message


def test_valid_caps_are_kept() -> None:
    assert declare(concurrency=3).concurrency == 3
    assert declare(concurrency=2.0).concurrency == 2
    keyed = declare(concurrency={"key": by_account}).concurrency
    assert keyed == KeyedConcurrency(key=by_account, limit=1, when_busy="wait")
    failing = declare(concurrency=KeyedConcurrency(by_account, 2, "fail"))
    assert failing.describe()["concurrency"] == {"keyed": True, "limit": 2, "whenBusy": "fail"}


# --- § The deadline cancels: zero or negative ceilings are refused ---------------------------


@pytest.mark.parametrize("field", ["timeout", "step_timeout", "event_poll"])
@pytest.mark.parametrize(
    "value", [0, -1, "0s", "0ms", timedelta(0), timedelta(seconds=-1), 0.4, math.nan, "soon"]
)
def test_a_ceiling_that_would_read_as_no_ceiling_is_refused(field: str, value: Any) -> None:
    error = refused(**{field: value})
    assert error.meta["field"] == field


def test_ceilings_are_kept_in_milliseconds_and_event_poll_defaults_to_30s() -> None:
    described = declare(timeout="5m", step_timeout=timedelta(seconds=30), event_poll=250).describe()
    assert (described["timeoutMs"], described["stepTimeoutMs"], described["eventPollMs"]) == (
        300_000,
        30_000,
        250,
    )
    absent = declare().describe()
    assert (absent["timeoutMs"], absent["stepTimeoutMs"]) == (None, None)
    assert absent["eventPollMs"] == DEFAULT_EVENT_POLL_MS == 30_000


# --- the rest of the declaration -------------------------------------------------------------


def test_retry_accepts_a_policy_or_a_dict_and_refuses_nonsense_as_a_declaration_error() -> None:
    assert declare(retry=Retry(attempts=5)).retry.attempts == 5
    assert declare(retry={"attempts": 2, "backoff": "fixed"}).retry.backoff == "fixed"
    assert declare().retry == Retry()
    refused(retry={"attempts": 0})
    refused(retry={"tries": 3})


def test_queue_and_on_settled_are_checked() -> None:
    assert declare(queue="emails").queue == "emails"
    refused(queue="no spaces")
    refused(on_settled="log it")


def test_an_input_pydantic_cannot_describe_is_a_declaration_error() -> None:
    class Opaque:
        pass

    refused(input=Opaque)


# --- two definitions setting the same name= --------------------------------------------------


def test_two_definitions_setting_the_same_name_are_refused_at_the_second() -> None:
    first = declare(name="payments.charge")
    with pytest.raises(JobDuplicateError) as info:
        declare(name="payments.charge")
    assert info.value.code == "X_JOB_DUPLICATE"
    assert first.name == "payments.charge"


def test_a_task_may_share_a_jobs_name() -> None:
    handle = declare(name="digest")
    digest = task(name="digest", cron="0 3 * * *", tz="UTC", enqueue=lambda occ: [(handle, {})])
    assert digest.name == handle.name == "digest"


def test_a_collected_definition_no_longer_holds_its_name() -> None:
    declare(name="reloaded")  # dropped at once, as a module reload drops its old handles
    gc.collect()
    assert declare(name="reloaded").name == "reloaded"
