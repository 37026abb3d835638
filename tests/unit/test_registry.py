"""§ The export name is the job's name: ``define_api`` stamps names and refuses collisions.

Modules are built in the test (``ModuleType``) with bodies whose ``__module__`` names them, so
each test owns fresh handles; ``tests/unit/sample_app`` is the same thing written as files.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from ujobs import define_api, job, task
from ujobs.errors import InvariantError, JobDuplicateError
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import registry
from ujobs.jobs.task import TaskHandle


def declared_in(module: str, fn_name: str, **options: Any) -> JobHandle[Any]:
    """A job whose body was written in ``module`` as ``async def fn_name(run)``."""

    async def body(run: Any) -> None: ...

    body.__module__ = module
    body.__name__ = body.__qualname__ = fn_name
    handle: JobHandle[Any] = job(idempotency_key=lambda i: "k", tenant="none", **options)(body)
    return handle


def task_in(module: str, fn_name: str, entries: list[Any], **options: Any) -> TaskHandle:
    def enqueue(occurrence_ms: int) -> list[Any]:
        return entries

    enqueue.__module__ = module
    enqueue.__name__ = enqueue.__qualname__ = fn_name
    handle: TaskHandle = task(cron="0 3 * * *", tz="UTC", **options)(enqueue)
    return handle


def module(name: str, **attrs: Any) -> ModuleType:
    mod = ModuleType(name)
    vars(mod).update(attrs)
    return mod


def test_a_job_handed_to_nobody_keeps_its_function_name() -> None:
    assert declared_in("app.mail", "send_welcome").name == "send_welcome"


def test_the_export_name_is_stamped_onto_the_handle_the_module_exported() -> None:
    handle = declared_in("app.mail", "_deliver")
    mail = module("app.mail", notify=handle, _deliver=handle)
    api = define_api(jobs=[mail])
    assert handle.name == "notify"  # the object enqueue routes through, not a renamed copy
    assert api.jobs == {"notify": handle}
    assert handle.request({}).name == "notify"


def test_a_definition_that_sets_name_keeps_it() -> None:
    handle = declared_in("app.mail", "send", name="mail.send")
    define_api(jobs=[module("app.mail", renamed_export=handle)])
    assert handle.name == "mail.send"


def test_an_explicitly_named_handle_leaves_its_export_name_free() -> None:
    named = declared_in("app.mail", "send", name="mail.send")
    other = declared_in("app.sms", "_n")
    api = define_api(jobs=[module("app.mail", notify=named), module("app.sms", notify=other)])
    assert api.jobs == {"mail.send": named, "notify": other}


def test_an_imported_handle_registers_under_its_own_name_without_stamping() -> None:
    handle = declared_in("app.mail", "send_mail")
    billing = module("app.billing", mailer=handle)
    api = define_api(jobs=[billing])
    assert handle.name == "send_mail"
    assert api.jobs == {"send_mail": handle}


def test_the_home_module_stamps_even_when_an_importer_is_listed_first() -> None:
    handle = declared_in("app.mail", "_deliver")
    billing = module("app.billing", mailer=handle)
    mail = module("app.mail", notify=handle)
    api = define_api(jobs=[billing, mail])
    assert api.jobs == {"notify": handle}


def test_the_same_handle_twice_is_one_registration() -> None:
    handle = declared_in("app.mail", "notify")
    mail = module("app.mail", notify=handle)
    billing = module("app.billing", notify=handle)
    assert define_api(jobs=[mail, mail, billing]).jobs == {"notify": handle}
    assert define_api(jobs=[mail]).jobs == {"notify": handle}  # a second define_api: the same
    assert registry().jobs == {"notify": handle}


def test_one_handle_exported_twice_by_its_module_is_refused() -> None:
    handle = declared_in("app.mail", "_notify")
    mail = module("app.mail", a=handle, b=handle)
    with pytest.raises(JobDuplicateError) as info:
        define_api(jobs=[mail])
    assert info.value.code == "X_JOB_DUPLICATE"
    assert info.value.meta["exports"] == ["a", "b"]
    assert handle.name == "_notify"  # refused before anything was renamed
    assert registry().jobs == {}


def test_an_explicitly_named_handle_exported_twice_is_refused_too() -> None:
    handle = declared_in("app.mail", "send", name="mail.send")
    with pytest.raises(JobDuplicateError):
        define_api(jobs=[module("app.mail", a=handle, b=handle)])


def test_two_different_handles_under_one_export_name_are_refused() -> None:
    first = declared_in("app.mail", "_a")
    second = declared_in("app.sms", "_b")
    with pytest.raises(JobDuplicateError) as info:
        define_api(jobs=[module("app.mail", notify=first), module("app.sms", notify=second)])
    assert info.value.meta == {"name": "notify"}
    assert (first.name, second.name) == ("_a", "_b")


def test_an_explicit_name_colliding_with_another_jobs_export_name_is_refused() -> None:
    named = declared_in("app.mail", "send", name="notify")
    exported = declared_in("app.sms", "_n")
    with pytest.raises(JobDuplicateError):
        define_api(jobs=[module("app.mail", send=named), module("app.sms", notify=exported)])


def test_a_name_registered_by_an_earlier_define_api_is_not_taken_over() -> None:
    define_api(jobs=[module("app.mail", notify=declared_in("app.mail", "notify"))])
    with pytest.raises(JobDuplicateError):
        define_api(jobs=[module("app.sms", notify=declared_in("app.sms", "notify"))])


def test_private_attributes_are_not_exports() -> None:
    handle = declared_in("app.mail", "_hidden")
    assert define_api(jobs=[module("app.mail", _hidden=handle)]).jobs == {}


def test_tasks_are_stamped_and_the_jobs_they_enqueue_are_registered() -> None:
    digest_job = declared_in("app.mail", "send_digest")
    nightly = task_in("app.schedules", "_nightly", [(digest_job, {})])
    api = define_api(tasks=[module("app.schedules", nightly_digest=nightly)])
    assert nightly.name == "nightly_digest"
    assert api.tasks == {"nightly_digest": nightly}
    assert api.jobs == {"send_digest": digest_job}
    assert [row["name"] for row in api.manifest()["tasks"]] == ["nightly_digest"]


def test_two_tasks_under_one_name_are_refused() -> None:
    first = task_in("app.a", "_x", [])
    second = task_in("app.b", "_y", [])
    with pytest.raises(JobDuplicateError):
        define_api(tasks=[module("app.a", nightly=first), module("app.b", nightly=second)])


def test_install_false_leaves_the_process_registry_alone() -> None:
    handle = declared_in("app.mail", "notify")
    api = define_api(jobs=[module("app.mail", notify=handle)], install=False)
    assert api.jobs == {"notify": handle}
    assert registry().jobs == {}
    assert api.registry().job("notify") is handle


def test_the_manifest_lists_every_descriptor_sorted_by_name() -> None:
    b = declared_in("app.m", "b_job")
    a = declared_in("app.m", "a_job")
    manifest = define_api(jobs=[module("app.m", b_job=b, a_job=a)]).manifest()
    assert [row["name"] for row in manifest["jobs"]] == ["a_job", "b_job"]
    assert manifest["tasks"] == []


@pytest.mark.parametrize(
    "jobs",
    [
        ["app.mail"],
        "app.mail",
        [None],
        [[]],
    ],
    ids=repr,
)
def test_define_api_takes_modules_never_names(jobs: Any) -> None:
    with pytest.raises(InvariantError):
        define_api(jobs=jobs)


def test_define_api_refuses_a_handle_or_a_bare_module_in_place_of_a_list() -> None:
    handle = declared_in("app.mail", "notify")
    with pytest.raises(InvariantError, match="never handles"):
        define_api(jobs=[handle])
    with pytest.raises(InvariantError, match="list of modules"):
        define_api(jobs=module("app.mail", notify=handle))  # type: ignore[arg-type]


def test_the_sample_app_as_files() -> None:
    from tests.unit.sample_app import api, billing, mail, schedules

    assert mail.notify.name == "notify"  # `notify = job(...)(_deliver)`
    assert billing.mailer is mail.send_mail  # imported, and registered once as send_mail
    assert billing.charge.name == "billing.charge"
    assert sorted(api.jobs) == ["billing.charge", "invoice", "notify", "refund", "send_mail"]
    assert api.tasks == {"nightly_digest": schedules.nightly_digest}
