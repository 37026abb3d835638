"""The webhooks guide's "Try webhooks locally" paragraph, run as pasted: its receiver (with the
partner kit's Python verifier beside it) on 127.0.0.1, its shell lines against a migrated
database, and the delivery the real ``ujobs webhook-deliverer`` makes, verified and printed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.e2e.service_process import ROOT, service_env
from tests.support.docs import blocks, page

PAGE = "guides/webhooks.md"
WAIT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _snippets() -> tuple[str, str]:
    text = page(PAGE)
    [receiver] = [b for b in blocks(text, "python") if "verify_standard" in b]
    [shell] = [b for b in blocks(text, "sh") if "UJOBS_WEBHOOK_ALLOW_HTTP" in b]
    return receiver, shell


def test_a_local_receiver_gets_a_delivery_it_verifies_with_the_kit(
    pg_dsn: str, tmp_path: Path
) -> None:
    receiver, shell = _snippets()
    assert "127.0.0.1" in receiver
    assert "9000" in receiver
    port = str(_free_port())
    (tmp_path / "receiver.py").write_text(receiver.replace("9000", port))
    shutil.copy(ROOT / "webhooks/verify/python/verify_webhook.py", tmp_path)
    (tmp_path / "try.sh").write_text("set -e\n" + shell.replace("9000", port))
    env = service_env(DATABASE_URL=pg_dsn)
    # `ujobs` and `python3` as a user's shell finds them: this interpreter's environment.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen(
        ["bash", "try.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    verified = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("verified "):
                verified.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        got = verified.wait(WAIT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
    assert got, "".join(lines)[-4000:]
    [line] = [x for x in lines if x.startswith("verified ")]
    assert '"ord_1"' in line
