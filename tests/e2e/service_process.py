"""A ``ujobs <service>`` child process for the end-to-end tests: its stdout and its JSON log
lines are read as they come (a full pipe would stall the child), and a test waits for a line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]


def service_env(**values: str) -> dict[str, str]:
    """This environment without any UJOBS_* / backend URL of the caller's, plus ``values``;
    the metrics endpoint on a free port (the default one is the machine's, not a test's)."""
    drop = ("UJOBS_", "DATABASE_URL", "REDIS_URL", "NATS_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = str(ROOT)
    env["UJOBS_METRICS_PORT"] = "0"
    env.update(values)
    return env


@dataclass
class ServiceProcess:
    name: str
    proc: asyncio.subprocess.Process
    out: list[str] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    readers: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def start(cls, *args: str, env: dict[str, str], cwd: Path = ROOT) -> ServiceProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ujobs.services.cli", *args,
            cwd=cwd, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        service = cls(args[0], proc)
        assert proc.stdout is not None
        assert proc.stderr is not None
        service.readers = [
            asyncio.ensure_future(service._read(proc.stdout, json_lines=False)),
            asyncio.ensure_future(service._read(proc.stderr, json_lines=True)),
        ]
        return service

    async def _read(self, stream: asyncio.StreamReader, *, json_lines: bool) -> None:
        while raw := await stream.readline():
            line = raw.decode().rstrip("\n")
            if json_lines:
                try:
                    self.logs.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    self.logs.append({"event": "(not json)", "line": line})
            else:
                self.out.append(line)
            self.changed.set()

    async def log_event(self, event: str, timeout_s: float = 30) -> dict[str, Any]:
        """The first log line of ``event`` (waiting for it)."""
        async with asyncio.timeout(timeout_s):
            while True:
                for line in self.logs:
                    if line.get("event") == event:
                        return line
                if self.proc.returncode is not None:
                    raise AssertionError(f"{self.name} exited {self.proc.returncode}: {self.logs}")
                self.changed.clear()
                await self.changed.wait()

    def events(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.logs if line.get("event") == event]

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    async def exit_code(self, timeout_s: float) -> int:
        async with asyncio.timeout(timeout_s):
            code = await self.proc.wait()
            await asyncio.gather(*self.readers)
        return code

    async def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        for reader in self.readers:
            reader.cancel()
