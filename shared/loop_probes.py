"""Awaitable signals a background loop emits, so tests wait on an event instead of sleeping.

A loop calls ``signals.emit("fired", payload)``; a test awaits
``signals.wait("fired", lambda p: p.task == "digest")`` with a timeout. Emitted payloads are
kept (a bounded history), so a wait that starts after the event still sees it; ``mark()``
answers a position to wait from when only later events count. ``subscribe`` hands every later
event to a callback as it is emitted (the services count their metrics this way).

The history is kept in a production process too, so an event whose payload can be heavy gets a
bound of its own (``caps``): the worker's ``settled`` payload holds the run's result and error.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

Listener = Callable[[str, Any], None]

DEFAULT_WAIT_S = 10.0


class Signals:
    def __init__(self, history: int = 10_000, *, caps: Mapping[str, int] | None = None) -> None:
        """``history`` events are kept, but an event named in ``caps`` keeps only its own
        last ``caps[event]`` payloads, apart from the others."""
        self._events: deque[tuple[int, str, Any]] = deque(maxlen=history)
        self._capped: dict[str, deque[tuple[int, str, Any]]] = {
            event: deque(maxlen=cap) for event, cap in (caps or {}).items()
        }
        self._seq = 0
        self._changed: asyncio.Event | None = None
        self._listeners: list[Listener] = []

    def emit(self, event: str, payload: Any = None) -> None:
        self._seq += 1
        self._capped.get(event, self._events).append((self._seq, event, payload))
        if self._changed is not None:
            self._changed.set()
        for listener in self._listeners:
            listener(event, payload)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, payload)`` on every later emit (it must not raise); answers
        the unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def mark(self) -> int:
        """The position after every event emitted so far."""
        return self._seq

    def emitted(self, event: str, since: int = 0) -> list[Any]:
        kept = self._capped.get(event, self._events)
        return [p for seq, name, p in kept if name == event and seq > since]

    async def wait(
        self,
        event: str,
        predicate: Callable[[Any], bool] | None = None,
        *,
        since: int = 0,
        timeout_s: float = DEFAULT_WAIT_S,
    ) -> Any:
        """The first payload of ``event`` after position ``since`` that matches ``predicate``;
        ``TimeoutError`` when none arrives within ``timeout_s``."""

        def found() -> tuple[bool, Any]:
            for payload in self.emitted(event, since):
                if predicate is None or predicate(payload):
                    return True, payload
            return False, None

        async def watch() -> Any:
            while True:
                hit, payload = found()
                if hit:
                    return payload
                if self._changed is None:
                    self._changed = asyncio.Event()
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(watch(), timeout_s)
