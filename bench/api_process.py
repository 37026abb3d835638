"""``ujobs api`` as its own process for the edge benches: started on a free port with the
bench's app, answered once it logs ``ujobs.api.listening``; its log is read on a thread so a
full pipe never blocks it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _drain_log(stream: IO[str]) -> None:
    for _ in stream:
        pass


def start_api(dsn: str, **settings: str) -> tuple[subprocess.Popen[str], str]:
    """The api over ``dsn`` (no inherited ``UJOBS_*`` or ``REDIS_URL``; ``settings`` on top of
    ``UJOBS_APP=http_edge_app:api``) and its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
    env.pop("REDIS_URL", None)
    env.update(
        DATABASE_URL=dsn,
        UJOBS_APP="http_edge_app:api",
        PYTHONPATH=f"{HERE}:{ROOT}",
    )
    env.update(settings)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ujobs.services.cli", "api", "--port", "0"],
        cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == "ujobs.api.listening":
            threading.Thread(target=_drain_log, args=(proc.stderr,), daemon=True).start()
            return proc, f"http://{record['addresses'][0]}"
    raise SystemExit(f"ujobs api did not start (exit {proc.wait()})")
