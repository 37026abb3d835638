"""The storm's OS processes: ``ujobs`` services of one role each, started from one command line
and environment, SIGKILLed and started again, SIGSTOPped and resumed; each logs to a file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UJOBS = Path(sys.executable).parent / "ujobs"
APP = "tests.chaos.storm_app:api"


def service_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of one storm service: ours only (no inherited ``UJOBS_*`` or URLs)."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UJOBS_", "STORM_"))
        and k not in ("DATABASE_URL", "REDIS_URL", "NATS_URL")
    }
    return {
        **keep,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "STORM_LEDGER_URL": database_url,
        "UJOBS_APP": APP,
        "UJOBS_LOG_LEVEL": "warning",
        "UJOBS_DRAIN_DEADLINE_MS": "2000",
        # Dozens of services on one host: each its own free /metrics port (the default one,
        # taken, is an error at start).
        "UJOBS_METRICS_PORT": "0",
        **settings,
    }


@dataclass(frozen=True)
class Role:
    """One kind of process: ``worker``, ``relay``, ``scheduler`` (a participant may add its
    own); ``command`` is what follows ``ujobs``."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str]


@dataclass
class Member:
    role: Role
    proc: subprocess.Popen[bytes]
    log: Path


REFUSED_AT_START = "X_DRIVER_UNAVAILABLE"
"""What a service prints as its last line when a backend refuses it at start (Postgres
restarting: 'the database system is shutting down'); it exits 1 and is started again."""


@dataclass(frozen=True)
class Exit:
    """A member that exited without a kill: its role, exit code and last log line."""

    role: str
    code: int
    last_line: str

    @property
    def label(self) -> str:
        return f"{self.role}:{self.code}"

    @property
    def refused_at_start(self) -> bool:
        return self.last_line.startswith(REFUSED_AT_START)


@dataclass
class Fleet:
    logs: Path
    members: list[Member] = field(default_factory=list)
    started: int = 0
    env: dict[str, str] = field(default_factory=dict)
    """Settings every member gets on top of its role's (the participants' ``fleet_env``)."""

    def start(self, role: Role) -> Member:
        self.started += 1
        path = self.logs / f"{role.name}-{self.started}.log"
        log = path.open("wb")
        proc = subprocess.Popen(
            [str(UJOBS), *role.command],
            env={**role.env, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        member = Member(role, proc, path)
        self.members.append(member)
        return member

    def alive(self, role_name: str | None = None) -> list[Member]:
        return [
            m
            for m in self.members
            if m.proc.poll() is None and (role_name is None or m.role.name == role_name)
        ]

    def kill_and_replace(self, member: Member) -> Member:
        """SIGKILL ``member`` (what a crash does), wait for it, start its role again."""
        member.proc.kill()
        member.proc.wait()
        self.members.remove(member)
        return self.start(member.role)

    def reap(self) -> list[Exit]:
        """Members that exited on their own (no kill): started again; answers how each ended."""
        exits = self.exited()
        gone = [m for m in self.members if m.proc.poll() is not None]
        for member in gone:
            self.members.remove(member)
            self.start(member.role)
        return exits

    def exited(self) -> list[Exit]:
        """How each member that exited on its own ended, leaving them where they are."""
        return [
            Exit(m.role.name, int(m.proc.returncode), _last_line(m.log))
            for m in self.members
            if m.proc.poll() is not None
        ]

    def stop_all(self) -> None:
        for m in self.members:
            if m.proc.poll() is None:
                m.proc.send_signal(signal.SIGCONT)
                m.proc.terminate()
        for m in self.members:
            try:
                m.proc.wait(20)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()


def _last_line(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return lines[-1][:300] if lines else ""
