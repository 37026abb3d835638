"""``ujobs jobs …`` against a real Postgres: tables, --json, X_ codes and exit codes."""

from __future__ import annotations

from tests.support.cli import enqueue, json_of, run_to, ujobs, with_driver
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver


def seed(dsn: str) -> dict[str, str]:
    """A done job with steps a, b, c; a dead one; a ready one; a delayed one of priority 4
    (newest last)."""

    async def work(driver: PostgresDriver) -> dict[str, str]:
        ids = {}
        ids["done"] = await enqueue(driver, "onboard_org", "k-done")
        await run_to(driver, ids["done"], steps=("a", "b", "c"), result='{"secret": "res-done"}')
        ids["dead"] = await enqueue(driver, "charge", "k-dead", max_attempts=1)
        await run_to(driver, ids["dead"], steps=("a",), dead="X_CARD_DECLINED: card declined")
        ids["ready"] = await enqueue(driver, "onboard_org", "k-ready")
        ids["delayed"] = await enqueue(
            driver,
            "report",
            "k-later",
            queue="reports",
            run_at_ms=driver.clock.now_ms() + 3_600_000,
            priority=4,
        )
        return ids

    return with_driver(dsn, work)


def test_list_prints_an_aligned_table_newest_first(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "list", dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == [
        "ID", "NAME", "QUEUE", "PRI", "STATE", "ATTEMPT", "CREATED", "RUN", "AT", "PROGRESS",
        "LAST", "ERROR",
    ]  # fmt: skip
    assert [r.split()[0] for r in rows] == [ids["delayed"], ids["ready"], ids["dead"], ids["done"]]
    # Aligned: every row's STATE column starts where the header's does.
    column = header.index("STATE")
    assert {r[column:].split()[0] for r in rows} == {"ready", "delayed", "dead", "done"}
    column = header.index("PRI")
    assert [r[column:].split()[0] for r in rows] == ["4", "0", "0", "0"]
    dead = next(r for r in rows if r.startswith(ids["dead"]))
    assert "X_CARD_DECLINED: card declined" in dead
    assert "1/1" in dead


def test_list_json_filters_and_pages(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    page = json_of(ujobs("jobs", "list", "--json", "--name", "onboard_org", dsn=pg_dsn))
    assert [j["id"] for j in page["jobs"]] == [ids["ready"], ids["done"]]
    assert page["last"] is True
    assert "input" not in page["jobs"][0]
    first = json_of(ujobs("jobs", "list", "--json", "--limit", "1", dsn=pg_dsn))
    assert [j["id"] for j in first["jobs"]] == [ids["delayed"]]
    second = json_of(
        ujobs("jobs", "list", "--json", "--limit", "1", "--after", first["next"], dsn=pg_dsn)
    )
    assert [j["id"] for j in second["jobs"]] == [ids["ready"]]
    dead = json_of(ujobs("jobs", "list", "--json", "--state", "dead", dsn=pg_dsn))
    assert [(j["id"], j["state"]) for j in dead["jobs"]] == [(ids["dead"], "dead")]


def test_list_tells_a_person_about_the_next_page(pg_dsn: str) -> None:
    seed(pg_dsn)
    result = ujobs("jobs", "list", "--limit", "2", dsn=pg_dsn)
    assert result.exit_code == 0
    assert "more: ujobs jobs list --after " in result.stderr
    empty = ujobs("jobs", "list", "--state", "cancelled", dsn=pg_dsn)
    assert empty.exit_code == 0
    assert empty.stdout.splitlines()[0].startswith("ID")
    assert "no jobs match" in empty.stderr


def test_bad_input_is_its_x_code_and_exit_1(pg_dsn: str) -> None:
    state = ujobs("jobs", "list", "--state", "deed", dsn=pg_dsn)
    assert state.exit_code == 1
    assert state.stderr.startswith("X_CONFIG_INVALID: --state: 'deed' is not one of")
    assert "did you mean 'dead'?" in state.stderr
    limit = ujobs("jobs", "list", "--limit", "500", "--json", dsn=pg_dsn)
    assert limit.exit_code == 1
    assert json_of(limit)["error"]["code"] == "X_JOB_PAGE_INVALID"
    cursor = ujobs("jobs", "list", "--after", "garbage", dsn=pg_dsn)
    assert cursor.stderr.startswith("X_JOB_PAGE_INVALID: ")
    since = ujobs("jobs", "list", "--created-from", "yesterday", dsn=pg_dsn)
    assert since.stderr.startswith("X_CONFIG_INVALID: --created-from: 'yesterday'")
    unknown = ujobs("jobs", "show", "01ffffff-0000-7000-8000-000000000000", dsn=pg_dsn)
    assert unknown.exit_code == 1
    assert unknown.stderr.startswith("X_JOB_NOT_FOUND: ")
    assert "ujobs jobs list" in unknown.stderr


def test_show_redacts_the_input_and_never_prints_step_outputs(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "show", ids["done"], dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert '"org_id":"[redacted]"' in out
    assert "k-done@example.com" not in out
    assert "k-done" not in out  # the key, computed from the input, is masked with it
    assert "out-a" not in out
    assert "res-done" not in out
    assert 'result       {"secret":"[redacted]"}' in out
    assert "the result's values are redacted: --show-output prints them" in result.stderr
    assert "steps (3)" in out
    assert [line.split()[1] for line in out.split("steps (3)")[1].splitlines()[2:]] == [
        "a",
        "b",
        "c",
    ]
    assert "--show-input prints them" in result.stderr
    doc = json_of(ujobs("jobs", "show", ids["done"], "--json", dsn=pg_dsn))
    assert doc["input"] == {"org_id": "[redacted]", "email": "[redacted]"}
    assert doc["inputRedacted"] is True
    assert doc["idempotencyKey"] == "[redacted]"
    listed = json_of(ujobs("jobs", "list", "--json", dsn=pg_dsn))["jobs"]
    assert {job["idempotencyKey"] for job in listed} == {"[redacted]"}
    assert [s["name"] for s in doc["steps"]] == ["a", "b", "c"]
    assert "output" not in doc["steps"][0]
    assert (doc["result"], doc["resultRedacted"]) == ({"secret": "[redacted]"}, True)
    assert (doc["state"], doc["attempt"], doc["maxAttempts"], doc["priority"]) == ("done", 1, 3, 0)
    delayed = ujobs("jobs", "show", ids["delayed"], dsn=pg_dsn)
    assert "priority     4" in delayed.stdout
    assert json_of(ujobs("jobs", "show", ids["delayed"], "--json", dsn=pg_dsn))["priority"] == 4
    shown = ujobs("jobs", "show", ids["done"], "--show-output", dsn=pg_dsn)
    assert 'result       {"secret":"res-done"}' in shown.stdout
    assert "redacted: --show-output" not in shown.stderr
    full = json_of(ujobs("jobs", "show", ids["done"], "--json", "--show-output", dsn=pg_dsn))
    assert full["result"] == {"secret": "res-done"}
    assert "resultRedacted" not in full


def test_show_input_and_output_on_request(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    doc = json_of(
        ujobs("jobs", "show", ids["dead"], "--json", "--show-input", "--show-output", dsn=pg_dsn)
    )
    assert doc["input"] == {"org_id": "k-dead", "email": "k-dead@example.com"}
    assert doc["idempotencyKey"] == "k-dead"  # shown with the input it was computed from
    assert doc["steps"][0]["output"] == {"secret": "out-a"}
    assert doc["lastError"] == "X_CARD_DECLINED: card declined"
    table = ujobs("jobs", "show", ids["dead"], "--show-output", dsn=pg_dsn)
    assert "last error" in table.stdout
    assert "out-a" in table.stdout


def test_retry_from_step_drops_that_step_and_every_later_one(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "retry", ids["done"], "--from-step", "b", "--json", dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    assert json_of(result)["state"] == "ready"
    doc = json_of(ujobs("jobs", "show", ids["done"], "--json", dsn=pg_dsn))
    assert [s["name"] for s in doc["steps"]] == ["a"]
    assert doc["attempt"] == 0


def test_retry_refuses_a_live_job_and_a_set_with_from_step(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    live = ujobs("jobs", "retry", ids["ready"], dsn=pg_dsn)
    assert live.exit_code == 1
    assert live.stderr.startswith("X_JOB_NOT_REQUEUEABLE: ")
    both = ujobs("jobs", "retry", ids["ready"], "--state", "dead", dsn=pg_dsn)
    assert both.stderr.startswith("X_CONFIG_INVALID: ")
    neither = ujobs("jobs", "retry", dsn=pg_dsn)
    assert neither.exit_code == 1
    from_step = ujobs("jobs", "retry", "--state", "dead", "--from-step", "a", dsn=pg_dsn)
    assert from_step.stderr.startswith("X_CONFIG_INVALID: --from-step")


def test_retry_every_dead_job(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "retry", "--state", "dead", "--json", dsn=pg_dsn)
    assert json_of(result) == {"affected": 1, "remaining": 0}
    doc = json_of(ujobs("jobs", "show", ids["dead"], "--json", dsn=pg_dsn))
    assert doc["state"] == "ready"
    table = ujobs("jobs", "retry", "--state", "dead", dsn=pg_dsn)
    assert table.stdout.strip() == "retry: 0 jobs moved, 0 left"


def test_cancel_a_live_job_once(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "cancel", ids["ready"], "--reason", "runaway", dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"cancel: {ids['ready']} (onboard_org) is cancelled"
    doc = json_of(ujobs("jobs", "show", ids["ready"], "--json", dsn=pg_dsn))
    assert doc["state"] == "cancelled"
    assert doc["lastError"] == "cancelled: runaway"
    again = ujobs("jobs", "cancel", ids["ready"], "--json", dsn=pg_dsn)
    assert again.exit_code == 1
    assert json_of(again)["error"]["code"] == "X_JOB_NOT_CANCELLABLE"


def test_remove_one_and_a_confirmed_set(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    one = ujobs("jobs", "remove", ids["done"], "--json", dsn=pg_dsn)
    assert json_of(one) == {"id": ids["done"], "removed": True}
    gone = ujobs("jobs", "remove", ids["done"], dsn=pg_dsn)
    assert gone.stderr.startswith("X_JOB_NOT_FOUND: ")
    unconfirmed = ujobs("jobs", "remove", "--state", "dead", dsn=pg_dsn)
    assert unconfirmed.exit_code == 1
    assert unconfirmed.stderr.startswith("X_CONFIRMATION_REQUIRED: ")
    confirmed = ujobs("jobs", "remove", "--state", "dead", "--yes", "--json", dsn=pg_dsn)
    assert json_of(confirmed) == {"affected": 1, "remaining": 0}
    left = json_of(ujobs("jobs", "list", "--json", dsn=pg_dsn))
    assert sorted(j["id"] for j in left["jobs"]) == sorted([ids["ready"], ids["delayed"]])


def test_promote_a_delayed_job(pg_dsn: str) -> None:
    ids = seed(pg_dsn)
    result = ujobs("jobs", "promote", ids["delayed"], "--json", dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    assert json_of(result)["state"] == "ready"
    done = ujobs("jobs", "promote", ids["done"], dsn=pg_dsn)
    assert done.stderr.startswith("X_JOB_NOT_PROMOTABLE: ")


def test_show_prints_the_parent_and_the_children(pg_dsn: str) -> None:
    async def work(driver: PostgresDriver) -> tuple[str, list[str]]:
        parent = await enqueue(driver, "onboard_org", "k-parent")
        kids = []
        for n in range(3):
            request = EnqueueRequest(name="charge", input={"n": n}, idempotency_key=f"kid-{n}")
            answer = await driver.children.enqueue(request, parent_id=parent, detached=False)
            assert answer is not None
            kids.append(answer.id)
        return parent, kids

    parent, kids = with_driver(pg_dsn, work)
    shown = ujobs("jobs", "show", parent, dsn=pg_dsn)
    assert shown.exit_code == 0, shown.output
    assert "children (3)" in shown.stdout
    assert all(k in shown.stdout for k in kids)
    doc = json_of(ujobs("jobs", "show", "--json", kids[0], dsn=pg_dsn))
    assert doc["parentId"] == parent
    assert doc["children"] == {"items": [], "total": 0}
    parent_doc = json_of(ujobs("jobs", "show", "--json", parent, dsn=pg_dsn))
    assert parent_doc["parentId"] is None
    assert sorted(c["id"] for c in parent_doc["children"]["items"]) == sorted(kids)
    assert parent_doc["children"]["total"] == 3


def test_cancel_takes_the_children_unless_detach_children(pg_dsn: str) -> None:
    async def work(driver: PostgresDriver) -> list[tuple[str, str]]:
        pairs = []
        for n in range(2):
            parent = await enqueue(driver, "onboard_org", f"k-cancel-{n}")
            request = EnqueueRequest(name="charge", input={"n": n}, idempotency_key=f"c-{n}")
            child = await driver.children.enqueue(request, parent_id=parent, detached=False)
            assert child is not None
            pairs.append((parent, child.id))
        return pairs

    (first, first_kid), (second, second_kid) = with_driver(pg_dsn, work)
    assert ujobs("jobs", "cancel", first, dsn=pg_dsn).exit_code == 0
    kept = ujobs("jobs", "cancel", second, "--detach-children", dsn=pg_dsn)
    assert kept.exit_code == 0, kept.output
    states = {
        kid: json_of(ujobs("jobs", "show", "--json", kid, dsn=pg_dsn))["state"]
        for kid in (first_kid, second_kid)
    }
    assert states == {first_kid: "cancelled", second_kid: "ready"}
