"""The "Controlling when jobs run" guide's priority example, run as pasted (its ``main``): the
password reset enqueued last runs first, then the exports in their priority order, as its
comment says."""

from __future__ import annotations

import pytest

from tests.support.docs import marked_block, module_of, page


async def test_the_priority_example_runs_as_pasted(capsys: pytest.CaptureFixture[str]) -> None:
    code = marked_block(page("guides/controlling-jobs.md"), "priority")
    promised = [
        line.strip().removeprefix("# ")
        for line in code.split("print(execution.result)", 1)[1].splitlines()[1:4]
    ]
    module = module_of(code, "priority_example")
    await module.main()
    printed = capsys.readouterr().out.splitlines()
    assert printed == promised == ["reset mail to cy", "export for ada", "export for bob"]
