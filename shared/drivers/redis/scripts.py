"""The Redis driver's Lua scripts: read once from ``shared/drivers/redis/lua/``, called by SHA.

Every driver operation is one script, so it is atomic on the server and one round trip on the
wire. A script is ``prelude.lua`` (the key layout and the helpers every operation shares)
followed by the operation's own file, read once at import; what runs is exactly what a person
debugging a stuck queue can read there (``cat prelude.lua claim.lua`` is the claim script, to
run with ``redis-cli --eval`` and the key ``{<prefix>}``).

Why files under ``shared/drivers/redis/lua/`` and not ``sql/redis/``: they ship inside the package
(``importlib.resources``, listed in ``pyproject.toml``'s package data) beside the only module
that reads them, and ``sql/`` stays the Postgres schema and statements.

The server is handed a script by SHA (``EVALSHA``); the first call on a server that does not
know it (a fresh server, a restart, a ``SCRIPT FLUSH``, a failover) answers ``NOSCRIPT``, and
the script is loaded with ``SCRIPT LOAD`` and called again — once, never the source on every
call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import NoScriptError

LUA_DIR = "lua"
PRELUDE = "prelude.lua"
OPERATIONS = (
    "enqueue",
    "claim",
    "ack",
    "nack",
    "heartbeat",
    "start_ahead",
    "save_step",
    "load_steps",
    "stats",
    "counters",
    "mark",
    "result_watch",
)


def read_lua(file_name: str) -> str:
    """One file of ``shared/drivers/redis/lua/``, as shipped in the package."""
    return (resources.files("ujobs.drivers.redis") / LUA_DIR / file_name).read_text(
        encoding="utf-8"
    )


@dataclass(frozen=True, slots=True)
class LuaScript:
    """One operation's source and its SHA1, the name the server knows it by."""

    name: str
    source: str
    sha: str

    @classmethod
    def build(cls, name: str, prelude: str) -> LuaScript:
        source = f"{prelude}\n-- ===== {name}.lua =====\n{read_lua(f'{name}.lua')}"
        return cls(name=name, source=source, sha=hashlib.sha1(source.encode()).hexdigest())

    async def __call__(self, client: Redis | RedisCluster, keys: list[str], args: list[Any]) -> Any:
        """``EVALSHA``; on ``NOSCRIPT``, ``SCRIPT LOAD`` then ``EVALSHA`` again."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


def load_scripts() -> dict[str, LuaScript]:
    """Every operation's script, keyed by operation name."""
    prelude = read_lua(PRELUDE)
    return {name: LuaScript.build(name, prelude) for name in OPERATIONS}


SCRIPTS = load_scripts()
