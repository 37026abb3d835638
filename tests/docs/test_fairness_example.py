"""The "Fair by tenant" example of the controlling-jobs guide, run as pasted on the memory
driver: behind one tenant's burst of reports, a quiet tenant's report is in the worker's first
claim; the strict ledger queue posts its entries in the order they were sent."""

from __future__ import annotations

from typing import Any

from tests.support.docs import marked_block, module_of, page
from ujobs.clock import FrozenClock
from ujobs.drivers.memory.driver import memory_driver


async def test_the_fairness_example_runs_as_pasted() -> None:
    code = marked_block(page("guides/controlling-jobs.md"), "fairness")
    assert code.splitlines()[0] == "# app/reports.py"
    app: Any = module_of(code, "app_reports_doc")
    clock = FrozenClock()
    driver = memory_driver(clock=clock)
    for n in range(20):
        await driver.enqueue(app.render.request({"org": "bulk", "n": n}, clock=clock))
    await driver.enqueue(app.render.request({"org": "quiet", "n": 0}, clock=clock))
    for entry in range(5):
        await driver.enqueue(app.post_entry.request({"entry": entry}, clock=clock))
    worker = app.worker(driver)
    first = await worker.run_once()
    assert first.claimed == 5  # four report slots and the ledger's one
    await worker.join()
    assert ("quiet", 0) in app.RENDERED[:4]
    while (await worker.run_once()).claimed:
        await worker.join()
    assert len(app.RENDERED) == 21
    assert app.POSTED == [0, 1, 2, 3, 4]
