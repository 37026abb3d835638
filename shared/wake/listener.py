"""The wake: announces of "a row is due on this queue" from other processes, proven by a probe.

One ``ChannelWake`` holds ONE subscription session (a Redis pub/sub connection, or a Postgres
``LISTEN`` connection) and feeds every ``subscribe`` callback. The transport is a
``WakeSession`` (``ujobs.wake.transport_redis``, ``ujobs.wake.transport_postgres``); everything
else — the proof, the re-dial, the logs — lives here once, so both transports behave alike:

- **Proven before trusted.** After each dial a probe token is published through the OTHER path
  (a separate Redis connection, the Postgres pool). When it comes back on the session, ``live``
  turns True and ``jobs.wake.live`` is logged. When it does not within ``probe_timeout_s``,
  ``jobs.wake.unverified`` is logged ONCE for that episode, with the fix, and the loops keep
  the 2 s idle ceiling; the probe is retried every ``reprobe_every_s``.
- **Re-proven while trusted.** A live session is probed again every ``reprobe_every_s``, so a
  half-open connection that errors on nothing is found out too.
- **Re-dialled, never fatal.** A lost session (CLIENT KILL, a terminated backend, a restart)
  sets ``live`` False at once (``jobs.wake.lost``) and is dialled again with a doubling backoff
  (``backoff_min_s`` to ``backoff_max_s``); a new probe has to prove it before ``live`` comes
  back. Nothing here raises into the worker: meanwhile jobs start on the poll.
- **Probes stay inside.** A payload starting with ``PROBE_PREFIX`` (a character no queue name
  may start with) is consumed here and never reaches a subscriber — another worker's probe
  included.

Build one with ``redis_wake(url or client)`` or ``postgres_wake(dsn, pool)``; ``start()`` it,
hand it to the worker as its ``QueueWake``, ``stop()`` it at shutdown (both safe twice).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ujobs.errors import ConfigInvalidError
from ujobs.loop_probes import Signals
from ujobs.wake.protocol import QueueWake, WakeCallback
from ujobs.wake.session import WakeSession

if TYPE_CHECKING:
    import asyncpg
    import redis.asyncio as aioredis

    from ujobs.wake.transport_postgres import ConnectFactory, ProbeExecutor

log = logging.getLogger("ujobs.wake")

REDIS_WAKE_CHANNEL = "ujobs:wake"
POSTGRES_WAKE_CHANNEL = "x_jobs_wake"
OUTBOX_WAKE_CHANNEL = "x_outbox_wake"
PROBE_PREFIX = "~probe:"
"""Queue names start with a letter, digit or underscore, so this can never be a queue."""

DEFAULT_PROBE_TIMEOUT_S = 3.0
DEFAULT_REPROBE_EVERY_S = 60.0
DEFAULT_BACKOFF_MIN_S = 0.1
DEFAULT_BACKOFF_MAX_S = 5.0
OPEN_TIMEOUT_S = 15.0
"""A dial that has not subscribed within this long has failed (a blackholed server)."""
UNPROVEN_REPROBE_S = 15.0
"""An unproven session is probed again this often (a proven one every ``reprobe_every_s``)."""


class _ChannelView:
    """One listened channel presented as a ``QueueWake`` (the relay's ``x_outbox_wake``)."""

    def __init__(self, wake: ChannelWake, channel: str) -> None:
        self._wake = wake
        self._channel = channel

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        return self._wake.subscribe_channel(self._channel, callback)

    @property
    def live(self) -> bool:
        return self._wake.live


class ChannelWake:
    """A proven, self-healing subscription to one or more wake channels. ``subscribe`` hears
    the first channel (the jobs channel); ``channel(name)`` presents any other as a
    ``QueueWake``."""

    def __init__(
        self,
        session: Callable[[], WakeSession],
        channels: Sequence[str],
        *,
        transport: str,
        fix: str,
        probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
        reprobe_every_s: float = DEFAULT_REPROBE_EVERY_S,
        backoff_min_s: float = DEFAULT_BACKOFF_MIN_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        on_stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if not channels or any(not isinstance(c, str) or not c for c in channels):
            raise ConfigInvalidError(
                "a wake needs at least one non-empty channel name", meta={"channels": channels}
            )
        for name, value in (
            ("probe_timeout_s", probe_timeout_s),
            ("reprobe_every_s", reprobe_every_s),
            ("backoff_min_s", backoff_min_s),
            ("backoff_max_s", backoff_max_s),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigInvalidError(
                    f"{name} must be a positive number of seconds", meta={name: value}
                )
        self.channels: tuple[str, ...] = tuple(dict.fromkeys(channels))
        self.transport = transport
        self.signals = Signals()
        self._session_factory = session
        self._fix = fix
        self._probe_timeout_s = float(probe_timeout_s)
        self._reprobe_every_s = float(reprobe_every_s)
        self._backoff_min_s = float(backoff_min_s)
        self._backoff_max_s = max(float(backoff_max_s), self._backoff_min_s)
        self._on_stop = on_stop
        self._callbacks: dict[str, list[WakeCallback]] = {c: [] for c in self.channels}
        self._live = False
        self._unverified_logged = False
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._stopped = False

    # -- the QueueWake surface ----------------------------------------------------------------

    @property
    def live(self) -> bool:
        return self._live

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        """Hear every announce on the first channel; answers unsubscribe (safe twice)."""
        return self.subscribe_channel(self.channels[0], callback)

    def subscribe_channel(self, channel: str, callback: WakeCallback) -> Callable[[], None]:
        callbacks = self._callbacks.get(channel)
        if callbacks is None:
            raise ConfigInvalidError(
                f"this wake does not listen on {channel!r}; pass it in channels=",
                meta={"channel": channel, "channels": list(self.channels)},
            )
        callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return unsubscribe

    def channel(self, name: str) -> QueueWake:
        """``name`` as a ``QueueWake`` of its own, sharing this session and its proof."""
        if name not in self._callbacks:
            raise ConfigInvalidError(
                f"this wake does not listen on {name!r}; pass it in channels=",
                meta={"channel": name, "channels": list(self.channels)},
            )
        return _ChannelView(self, name)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Dial in the background and return at once; a second call does nothing."""
        if self._task is None and not self._stopped:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Close the session and stop re-dialling; safe twice and before ``start()``."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._set_live(False)
        if self._on_stop is not None:
            await self._on_stop()
        self.signals.emit("stopped")

    async def __aenter__(self) -> ChannelWake:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- delivery -----------------------------------------------------------------------------

    def _deliver(self, channel: str, payload: str) -> None:
        if payload.startswith(PROBE_PREFIX):
            self.signals.emit("probe", payload)
            waiter = self._pending.get(payload)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        self.signals.emit("delivered", (channel, payload))
        for callback in list(self._callbacks.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception(
                    "jobs.wake.callback-failed", extra={"channel": channel, "queue": payload}
                )

    # -- the session loop ---------------------------------------------------------------------

    async def _run(self) -> None:
        """The session loop, restarted if it ever fails: the wake must never die quietly and
        leave a worker believing nothing (it would merely poll at 2 s, but nobody would know)."""
        while not self._stopping.is_set():
            try:
                await self._sessions()
            except Exception:
                self._set_live(False)
                log.exception("jobs.wake.loop-failed", extra={"transport": self.transport})
                await self._pause(self._backoff_max_s)

    async def _sessions(self) -> None:
        backoff = self._backoff_min_s
        while not self._stopping.is_set():
            session = self._session_factory()
            try:
                await asyncio.wait_for(session.open(self.channels, self._deliver), OPEN_TIMEOUT_S)
            except asyncio.CancelledError:
                await _quietly(session.close())  # stopped mid-dial: leave no connection behind
                raise
            except Exception as exc:
                await _quietly(session.close())
                self._unproven("dial", exc)
                self.signals.emit("dial-failed", repr(exc))
                await self._pause(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
                continue
            self.signals.emit("dialled")
            try:
                if await self._hold(session):
                    backoff = self._backoff_min_s
            finally:
                was_live = self._live
                self._set_live(False)
                await _quietly(session.close())
            if self._stopping.is_set():
                break
            if was_live:
                log.warning(
                    "jobs.wake.lost",
                    extra={"transport": self.transport, "retry_in_s": backoff},
                )
            self.signals.emit("lost")
            await self._pause(backoff)
            backoff = min(backoff * 2, self._backoff_max_s)

    async def _hold(self, session: WakeSession) -> bool:
        """Prove the session, then keep it (re-proving it) until it is lost or fails a probe.
        Answers whether it was ever proven, which resets the re-dial backoff."""
        proven_once = False
        lost = asyncio.ensure_future(session.lost())
        try:
            while not self._stopping.is_set() and not lost.done():
                if await self._prove(session, lost):
                    proven_once = True
                    if not self._live:
                        self._set_live(True)
                        self._unverified_logged = False
                        log.info(
                            "jobs.wake.live",
                            extra={"transport": self.transport, "channels": list(self.channels)},
                        )
                        self.signals.emit("live")
                    wait_s = self._reprobe_every_s
                elif self._live or lost.done():
                    return proven_once  # lost, or a proven session went deaf: dial again
                else:
                    self._unproven("probe", None)
                    wait_s = min(self._reprobe_every_s, UNPROVEN_REPROBE_S)
                await asyncio.wait({lost}, timeout=wait_s)
            return proven_once
        finally:
            lost.cancel()
            await asyncio.gather(lost, return_exceptions=True)

    async def _prove(self, session: WakeSession, lost: asyncio.Future[None]) -> bool:
        """Publish a fresh token through the other path; True once it comes back here."""
        token = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[token] = waiter
        try:
            await asyncio.wait_for(session.probe(self.channels[0], token), self._probe_timeout_s)
            await asyncio.wait(
                {waiter, lost}, timeout=self._probe_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not waiter.done():
                self.signals.emit("probe-failed", "timeout" if not lost.done() else "lost")
                return False
            return True
        except Exception as exc:
            self.signals.emit("probe-failed", repr(exc))
            return False
        finally:
            self._pending.pop(token, None)
            waiter.cancel()

    def _unproven(self, stage: str, error: BaseException | None) -> None:
        if self._unverified_logged:
            return
        self._unverified_logged = True
        log.warning(
            "jobs.wake.unverified",
            extra={
                "transport": self.transport,
                "stage": stage,
                "error": repr(error) if error is not None else None,
                "fix": self._fix,
            },
        )
        self.signals.emit("unverified", stage)

    def _set_live(self, live: bool) -> None:
        self._live = live

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass


async def _quietly(closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception as exc:
        log.debug("jobs.wake.close-failed", extra={"error": repr(exc)})


def redis_wake(
    client_or_url: aioredis.Redis | str,
    channel: str = REDIS_WAKE_CHANNEL,
    *,
    channels: Sequence[str] = (),
    **options: Any,
) -> ChannelWake:
    """The Redis wake (the default): one pub/sub connection, probes through another.

    A URL builds both connections here (the subscription named ``ujobs-wake`` in CLIENT LIST)
    and closes them on ``stop()``; a client is used as given (the probe through it, the
    subscription on a connection of its pool) and left open. ``channels`` adds channels
    heard through ``channel(name)``. ``options``: ``probe_timeout_s``, ``reprobe_every_s``,
    ``backoff_min_s``, ``backoff_max_s``.
    """
    from ujobs.wake.transport_redis import redis_session_factory

    factory, close = redis_session_factory(client_or_url)
    return ChannelWake(
        factory,
        (channel, *channels),
        transport="redis",
        fix=(
            f"the probe published on {channel!r} never came back on the subscription, so idle "
            "workers keep the 2 s poll: point every enqueuer and worker at the same Redis "
            "(REDIS_URL), and use a server or proxy that forwards PUBLISH/SUBSCRIBE"
        ),
        on_stop=close,
        **options,
    )


def postgres_wake(
    connect: str | ConnectFactory,
    executor: asyncpg.Pool[Any] | ProbeExecutor,
    channels: Sequence[str] = (POSTGRES_WAKE_CHANNEL,),
    **options: Any,
) -> ChannelWake:
    """The Postgres wake: ONE dedicated ``LISTEN`` connection (dialled from ``connect``, a DSN
    or a coroutine factory — never a pooled connection, which the pool would hand to someone
    else), proven by ``select pg_notify(...)`` sent through ``executor`` (the pool).
    ``channels``: the first is the jobs channel ``subscribe`` hears; add ``x_outbox_wake``
    and present it to the relay with ``wake.channel('x_outbox_wake')``."""
    from ujobs.wake.transport_postgres import postgres_session_factory

    return ChannelWake(
        postgres_session_factory(connect, executor),
        channels,
        transport="postgres",
        fix=(
            "the LISTEN session never heard the probe sent through the pool, so idle workers "
            "keep the 2 s poll: a transaction-pooling proxy (PgBouncer pool_mode = transaction) "
            "delivers nothing — give the worker role a direct or session-pooled DATABASE_URL, "
            "and the same database for the pool and the listener"
        ),
        **options,
    )
