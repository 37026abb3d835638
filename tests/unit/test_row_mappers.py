"""Every driver's row mapper passes every field of the record it builds: a column added to
``JobRow``, ``ClaimedJob`` or ``ExhaustedJob`` (with a default, so nothing else fails) fails
here for each backend whose mapper does not carry it, instead of silently reading the default.

The mappers are found, not listed: every call of a record's constructor in ``shared/drivers``.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from ujobs.drivers.base import ClaimedJob, ExhaustedJob, JobRow

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = ROOT / "shared" / "drivers"
RECORDS = {cls.__name__: cls for cls in (JobRow, ClaimedJob, ExhaustedJob)}
BACKENDS = ("memory", "postgres", "redis")


def _constructions() -> list[tuple[str, str, int, ast.Call]]:
    """(backend folder, record name, line, call) for every record constructor call."""
    found = []
    for path in sorted(DRIVERS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in RECORDS
            ):
                backend = path.relative_to(DRIVERS).parts[0]
                found.append((backend, node.func.id, node.lineno, node))
    return found


CONSTRUCTIONS = _constructions()


@pytest.mark.parametrize(
    ("backend", "record", "line", "call"),
    CONSTRUCTIONS,
    ids=[f"{b}:{r}:{line}" for b, r, line, _ in CONSTRUCTIONS],
)
def test_the_mapper_names_every_field_of_the_record(
    backend: str, record: str, line: int, call: ast.Call
) -> None:
    fields = [f.name for f in dataclasses.fields(RECORDS[record])]
    # A hot mapper may pass the fields positionally (Postgres's claimed_job, one per claimed
    # row, whose order CLAIMED_FIELDS pins at import): then it passes every one of them.
    assert not call.args or len(call.args) == len(fields), (
        f"{backend} builds {record} with {len(call.args)} positional fields of {len(fields)} "
        f"(line {line}): pass all of them in order, or name each"
    )
    covered = fields[: len(call.args)] + [k.arg for k in call.keywords]
    missing = [f for f in fields if f not in covered]
    assert not missing, f"{backend}'s {record} mapper (line {line}) leaves out {missing}"


def test_every_backend_maps_a_claimed_and_an_exhausted_job() -> None:
    built = {(backend, record) for backend, record, _, _ in CONSTRUCTIONS}
    for backend in BACKENDS:
        assert (backend, "ClaimedJob") in built
        assert (backend, "ExhaustedJob") in built
    # The two backends with an operator surface map its row too.
    assert {("memory", "JobRow"), ("postgres", "JobRow")} <= built
