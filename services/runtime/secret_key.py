"""Where ``UJOBS_SECRET_KEY`` comes from: the variable itself, or a file ``UJOBS_SECRET_KEY_FILE``
names (the compose deployment's ``keygen`` service writes one into a volume on first start).

A key known to the world seals nothing: compose ships no default value, and a fresh
``docker compose up`` makes a key of its own instead. The file is read, never written, here;
``write_key_file`` is what ``ujobs webhooks new-key --into PATH`` calls, and it keeps a key that
is already there (every secret sealed so far opens only with it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ujobs.errors import ConfigInvalidError

KEY_VARIABLE = "UJOBS_SECRET_KEY"
FILE_VARIABLE = "UJOBS_SECRET_KEY_FILE"


def _invalid(variable: str, message: str, **meta: object) -> ConfigInvalidError:
    return ConfigInvalidError(f"{variable}: {message}", meta={"variable": variable, **meta})


def secret_key_text(env: Mapping[str, str]) -> str | None:
    """The key's text from ``UJOBS_SECRET_KEY`` or the file ``UJOBS_SECRET_KEY_FILE`` names;
    None when neither is set. Both set is refused: which one seals would be a guess."""
    direct = (env.get(KEY_VARIABLE) or "").strip()
    path = (env.get(FILE_VARIABLE) or "").strip()
    if direct and path:
        raise _invalid(
            FILE_VARIABLE,
            f"set {KEY_VARIABLE} or {FILE_VARIABLE}, not both",
            other=KEY_VARIABLE,
        )
    if not path:
        return direct or None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise _invalid(
            FILE_VARIABLE,
            f"no file at {path}; write one with `ujobs webhooks new-key --into {path}`",
            path=path,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(
            FILE_VARIABLE, f"cannot read {path} ({type(exc).__name__})", path=path
        ) from None
    if not text:
        raise _invalid(
            FILE_VARIABLE,
            f"{path} is empty; write a key with `ujobs webhooks new-key --into {path}`",
            path=path,
        )
    return text


def write_key_file(path: Path, key: str) -> bool:
    """Write ``key`` to ``path`` (owner-only) unless a key is already there; answers whether
    it wrote. Created exclusively, so two starts at once cannot both write."""
    try:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if not path.exists():
            flags |= os.O_EXCL
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(key + "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigInvalidError(
            f"--into: cannot write a key to {path} ({type(exc).__name__}: {exc.args[-1]})",
            meta={"path": str(path)},
        ) from None
    return True


__all__ = ["FILE_VARIABLE", "KEY_VARIABLE", "secret_key_text", "write_key_file"]
