"""CPU seconds of the processes a bench phase runs on, read from ``/proc``: what bounds a
pipeline on a machine whose cores every process of it shares.

``CpuGroups`` names the processes by role (``{"api": [pid], "nats_server": [pid], ...}``);
``snapshot()`` reads each role's user + system CPU so far, and ``used(before, after)`` the
seconds each role spent in between. ``pipeline_bound_per_s`` turns a phase's CPU a message
into the most messages a second the machine could carry: every core busy on the pipeline
(``cores / sum``), and no single-threaded role past one core (``1 / its share``).
``database_cpu_s`` is the CPU of every Postgres process serving one database, found by the
database name in their command lines (the drain benches' Postgres side).
"""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def database_cpu_s(database: str) -> float:
    """User + system CPU seconds so far of every Postgres process serving ``database`` (its
    backends, which name it in their command lines, those a pool opens mid-phase included);
    0.0 where /proc does not show them."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f" {database} ".encode() not in (proc / "cmdline").read_bytes().replace(b"\0", b" "):
                continue
        except OSError:
            continue
        total += process_cpu_s(int(proc.name))
    return total


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` (from ``/proc/net/tcp``'s socket inode and the
    processes' open sockets); None when it cannot be seen (another user's process)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(proc.name)
        except (PermissionError, FileNotFoundError, ProcessLookupError):
            continue
    return None


Snapshot = dict[str, float]


class CpuGroups:
    """Roles and their processes; the bench fills ``pids`` as it learns them."""

    def __init__(self, pids: dict[str, list[int]]) -> None:
        self.pids = pids

    def snapshot(self) -> Snapshot:
        return {role: sum(process_cpu_s(pid) for pid in pids) for role, pids in self.pids.items()}

    @staticmethod
    def used(before: Snapshot, after: Snapshot) -> Snapshot:
        return {role: after[role] - before.get(role, 0.0) for role in after}


def pipeline_bound_per_s(
    us_per_msg: dict[str, float], *, cores: int, single_threaded: tuple[str, ...]
) -> float | None:
    """Messages a second the machine could carry at these CPU costs a message; None when no
    CPU was seen (a phase shorter than the clock's tick, ``CLOCK_TICKS``)."""
    total = sum(us_per_msg.values())
    if total <= 0:
        return None
    bounds = [cores * 1e6 / total]
    bounds += [1e6 / us_per_msg[role] for role in single_threaded if us_per_msg.get(role)]
    return min(bounds)


__all__ = ["CpuGroups", "listener_pid", "pipeline_bound_per_s", "process_cpu_s"]
