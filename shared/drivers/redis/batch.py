"""Script calls issued in one turn of the event loop leave as ONE pipeline: one write, one read.

A worker with 16 slots settles jobs from 16 tasks, and each freed slot kicks a claim pass: in
a busy loop several acks, a claim and a heartbeat are issued in the same turn. Sent one by one,
each pays a pool checkout, a socket write, a read wake-up and redis-py's retry wrapper — on
a no-op job that per-command cost is most of what the worker spends. ``ScriptBatcher`` queues
each call, and the first call of a turn LEADS it: it yields for one loop turn (every call of
this turn queues behind it meanwhile), then sends everything queued by then as one
non-transactional pipeline; each caller still awaits its own answer, and a script error reaches
only its own caller. A leader alone in its turn (an idle worker's claim, a lone enqueue: the
pickup-latency path) sends and reads in its own task, as an unbatched call would, so the batch
costs it one loop turn and nothing else; a batch of several leaves from a task of its own, so a
cancelled caller never takes the others' answers down with it.

Operations whose script takes rows (``ack``: ``ARGV = head..., row..., row...``) go further:
``call_rows`` calls of one script with the same head in one turn become ONE ``EVALSHA`` whose
reply holds one answer per row, so sixteen acks cost the server and the client one command.

Nothing about atomicity is lost: every command is still one ``EVALSHA``, atomic on its own
(a merged one settles its rows one after another inside one script, each under its own
fence, as separate calls would); the pipeline only shares the round trip. A lone call costs
one loop turn more (microseconds) and goes out as a plain ``EVALSHA``. A call (or a row) whose
caller was cancelled before the flush is never sent.

``NOSCRIPT`` inside a pipeline (a restarted server, a ``SCRIPT FLUSH``) is answered per
command: those commands go again one by one through ``LuaScript.__call__``, which loads the
script and retries. A connection failure fails every call of the batch, as it would have
failed each of them alone.

Used with a plain ``Redis`` client. A ``RedisCluster`` client sends each call on its own: all
of a deployment's keys share one slot, but the cluster client's pipeline routes and retries
by its own rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from ujobs.drivers.redis.scripts import LuaScript


@dataclass(slots=True)
class Command:
    """One ``EVALSHA`` of a batch: its arguments and who waits for its answer.

    ``rows`` is None for a plain call (one caller, the whole reply); for a merged call it
    holds each row's future and arguments, and ``args`` starts as the shared head; ``seal()``
    appends the rows still awaited when the batch leaves.
    """

    script: LuaScript
    args: list[Any]
    future: asyncio.Future[Any] | None = None
    rows: list[tuple[asyncio.Future[Any], Sequence[Any]]] | None = None
    waiters: list[asyncio.Future[Any]] = field(default_factory=list)

    def seal(self) -> bool:
        """Drop the rows (or the call) nobody awaits any more; False when nothing is left."""
        if self.rows is None:
            return self.future is not None and not self.future.done()
        self.rows = [(future, row) for future, row in self.rows if not future.done()]
        self.waiters = [future for future, _ in self.rows]
        for _, row in self.rows:
            self.args.extend(row)
        return bool(self.rows)

    def answer(self, reply: Any) -> None:
        if self.rows is None:
            assert self.future is not None
            _settle(self.future, reply)
            return
        for (future, _), one in zip(self.rows, reply, strict=True):
            _settle(future, one)

    def fail(self, exc: BaseException) -> None:
        for future in self.waiters:
            _fail(future, exc)


class ScriptBatcher:
    """Queues script calls and flushes them once per event-loop turn (see the module doc)."""

    def __init__(self, client: Redis, keys: list[str]) -> None:
        self.client = client
        self.keys = keys
        self._pending: list[Command] = []
        self._merging: dict[tuple[str, tuple[Any, ...]], Command] = {}
        self._sending: set[asyncio.Task[None]] = set()

    def _queue(self, command: Command) -> None:
        if not self._pending:
            self._spawn()
        self._pending.append(command)

    def _spawn(self) -> None:
        """The turn's sender: a task whose first step runs on the loop's next turn, when every
        call of this turn is queued (one loop hop before the write)."""
        self._start(self._flush())

    def _start(self, sending: Coroutine[Any, Any, None]) -> None:
        """Run ``sending`` as a task of its own, referenced until it ends (never collected)."""
        task = asyncio.ensure_future(sending)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def call(self, script: LuaScript, args: list[Any]) -> asyncio.Future[Any]:
        """Queue one call; the future answers its reply (or raises its error)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue(Command(script, args, future=future, waiters=[future]))
        return future

    async def run(self, script: LuaScript, args: list[Any]) -> Any:
        """One call, answered directly: ``call`` and await, except that the FIRST call of a
        turn leads it (see the module doc) and, alone in its turn, is sent and read in the
        caller's own task — no sender task, no future between the reply and the caller."""
        if self._pending:
            return await self.call(script, args)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        command = Command(script, args, future=future, waiters=[future])
        self._pending.append(command)
        try:
            await asyncio.sleep(0)  # one loop turn: the calls of this turn queue behind it
        except asyncio.CancelledError:
            future.cancel()  # never sent; whatever else queued leaves without it
            self._spawn()
            raise
        batch = self._take()
        if len(batch) == 1 and batch[0] is command:
            return await script(self.client, self.keys, args)
        if batch:
            self._start(self._send(batch))
        return await future

    def call_rows(
        self, script: LuaScript, head: Sequence[Any], row: Sequence[Any]
    ) -> asyncio.Future[Any]:
        """Queue one row of a row-taking script; calls with the same ``head`` in this turn
        share one ``EVALSHA``. The future answers this row's element of the reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        key = (script.name, tuple(head))
        command = self._merging.get(key)
        if command is None:
            command = Command(script, list(head), rows=[])
            self._merging[key] = command
            self._queue(command)
        assert command.rows is not None
        command.rows.append((future, row))
        return future

    def _take(self) -> list[Command]:
        """Everything queued and still awaited, sealed; the queue starts over."""
        batch = [command for command in self._pending if command.seal()]
        self._pending = []
        self._merging = {}
        return batch

    async def _flush(self) -> None:
        batch = self._take()
        if batch:
            await self._send(batch)

    async def _send(self, batch: list[Command]) -> None:
        try:
            if len(batch) == 1:
                replies = [await batch[0].script(self.client, self.keys, batch[0].args)]
            else:
                replies = await self._pipeline(batch)
        except BaseException as exc:  # every caller hears the failure; the task ends quietly
            for command in batch:
                command.fail(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for command, reply in zip(batch, replies, strict=True):
            if isinstance(reply, NoScriptError):
                await self._again(command)
            elif isinstance(reply, Exception):
                command.fail(reply)
            else:
                command.answer(reply)

    async def _pipeline(self, batch: list[Command]) -> list[Any]:
        keys, n = self.keys, len(self.keys)
        async with self.client.pipeline(transaction=False) as pipe:
            for command in batch:
                pipe.evalsha(command.script.sha, n, *keys, *command.args)
            return list(await pipe.execute(raise_on_error=False))

    async def _again(self, command: Command) -> None:
        """A command the server did not know the script of: load it, send again, alone."""
        try:
            reply = await command.script(self.client, self.keys, command.args)
        except Exception as exc:
            command.fail(exc)
            return
        command.answer(reply)


def _settle(future: asyncio.Future[Any], reply: Any) -> None:
    if not future.done():
        future.set_result(reply)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
