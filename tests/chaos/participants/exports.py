"""Exports: ``storm.export`` (``tests.chaos.storm_app``) of a fixed table, one every
``EVERY_S`` seconds, run by two ``ujobs exporter`` processes writing to a filesystem store; the
storm SIGKILLs them mid-export, so a retried attempt resumes at its first unfinished page and
rewrites that part.

After the storm, one more export of the same rows runs with nothing killed (the reference),
and every artifact a storm export finished is compared with it byte for byte:
``export_parts_corrupt`` counts parts that differ, are missing or are extra, plus manifests
whose parts, rows or bytes differ from the reference's.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tests.chaos import storm_app
from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext
from ujobs.drivers.postgres import postgres_driver

if TYPE_CHECKING:
    from tests.chaos.fleet import Member

EXPORTERS = 2
EVERY_S = 2.0
REFERENCE = "reference"
REFERENCE_S = 90.0
ROWS_DDL = """
create table if not exists storm_export_rows (
  id     integer primary key,
  label  text    not null,
  amount numeric not null
);
insert into storm_export_rows
select g,
       'row ' || g || ', "quoted" ü 💥'
         || case when g % 7 = 0 then E'\\nline two' else '' end
         || case when g % 11 = 0 then ' =SUM(A1)' else '' end,
       g * 1.25
  from generate_series(1, 2000) g
on conflict do nothing
"""
"""Commas, quotes, newlines, non-ASCII and a formula: what an encoder could get wrong."""
EXPORT_ROWS = (
    "select input->>'export_id' as export_id, state from x_jobs where name = 'storm.export'"
)


class ExportRuns:
    name = "exports"

    def __init__(self) -> None:
        self.root: Path | None = None

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        self.root = ctx.fleet.logs / "exports"
        self.root.mkdir(parents=True, exist_ok=True)
        env = service_env(
            ctx.url, UJOBS_EXPORT_URL=str(self.root), UJOBS_VISIBILITY_TIMEOUT_MS="3000"
        )
        return [(Role("exporter", ("exporter",), env), EXPORTERS)]

    async def ready(self, ctx: StormContext) -> None:
        return None

    async def victims(self, ctx: StormContext) -> list[Member]:
        return ctx.fleet.alive("exporter")

    async def load(self, ctx: StormContext) -> None:
        await ctx.pool.execute(ROWS_DDL)
        driver = postgres_driver(ctx.pool)
        n = 0
        while True:
            try:
                await asyncio.wait_for(ctx.stopping.wait(), EVERY_S)
                return
            except TimeoutError:
                pass
            request = storm_app.export.request({"export_id": f"e{n}"})
            n += 1
            try:
                answer = await driver.enqueue(request)
            except Exception:  # Postgres restarting: not acknowledged
                ctx.error(self.name)
                continue
            ctx.ack(self.name, answer.id)

    async def _reference(self, ctx: StormContext) -> bool:
        await postgres_driver(ctx.pool).enqueue(storm_app.export.request({"export_id": REFERENCE}))
        deadline = time.monotonic() + REFERENCE_S
        while time.monotonic() < deadline:
            state = await ctx.pool.fetchval(
                "select state from x_jobs where name = 'storm.export' and input->>'export_id' = $1",
                REFERENCE,
            )
            if state == "done":
                return True
            await asyncio.sleep(0.5)
        return False

    def _artifact(self, export_id: str) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The manifest's counts and every part's bytes, by file name."""
        assert self.root is not None
        folder = self.root / "storm" / export_id
        manifest = orjson.loads((folder / "manifest.json").read_bytes())
        counts = {k: manifest[k] for k in ("parts", "rows", "bytes", "columns", "format")}
        parts = {p.name: p.read_bytes() for p in folder.iterdir() if p.name.startswith("part-")}
        return counts, parts

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        if not await self._reference(ctx):
            return {"exports_done": None, "export_parts_corrupt": None}
        want_counts, want_parts = self._artifact(REFERENCE)
        rows = [r for r in await ctx.pool.fetch(EXPORT_ROWS) if r["export_id"] != REFERENCE]
        done = [r["export_id"] for r in rows if r["state"] == "done"]
        corrupt: list[str] = []
        for export_id in done:
            try:
                counts, parts = self._artifact(export_id)
            except FileNotFoundError:
                corrupt.append(f"{export_id}/manifest.json")
                continue
            if counts != want_counts:
                corrupt.append(f"{export_id}/manifest.json")
            for name in sorted(set(want_parts) | set(parts)):
                if parts.get(name) != want_parts.get(name):
                    corrupt.append(f"{export_id}/{name}")
        return {
            "exports": len(rows),
            "exports_done": len(done),
            "export_parts": want_counts["parts"],
            "export_parts_corrupt": len(corrupt),
            "export_parts_corrupt_at": corrupt[:10],
        }
