"""The subjects, streams and consumer names of the NATS edge, from one prefix.

The default prefix ``ujobs`` gives the names of DESIGN.md § NATS; a test (or a second
deployment sharing one NATS) picks another prefix and gets its own subjects, streams and
consumer, so nothing it publishes reaches anyone else.

| Name | Default | What |
|---|---|---|
| ``enqueue_subject(job)`` | ``ujobs.enqueue.<job>`` | request/reply enqueue |
| ``event_subject(name)`` | ``ujobs.events.<name>`` | request/reply ``publish_event`` |
| ``js_enqueue_subject(job)`` | ``ujobs.js.enqueue.<job>`` | fire-and-forget enqueue through the stream |
| ``js_event_subject(name)`` | ``ujobs.js.events.<name>`` | fire-and-forget event through the stream |
| ``rejected_subject(job)`` | ``ujobs.rejected.<job>`` | why a stream message was refused |
| ``settled_subject(job)`` | ``ujobs.settled.<job>`` | one message per settlement |
| ``enqueue_stream`` | ``UJOBS_ENQUEUE`` | captures ``ujobs.js.enqueue.>`` and ``ujobs.js.events.>`` |
| ``settled_stream`` | ``UJOBS_SETTLED`` | captures ``ujobs.settled.>`` |
| ``durable`` | ``ujobs-api`` | the api's durable pull consumer on ``UJOBS_ENQUEUE`` |

Why the stream form has its own subjects (``ujobs.js.…``): JetStream answers every message
published on a stream's subject with a reply subject by a publish ack. A request on a subject
the stream also captured would get the stream's ``{"stream", "seq"}`` as its reply, racing the
api's answer, and the stored copy would be enqueued a second time by the consumer. One
subject cannot be both a request/reply service and a stream input. This departs from DESIGN.md
§ Streams (``UJOBS_ENQUEUE`` on ``ujobs.enqueue.>``); nothing in JetStream reconciles the two:
``no_ack`` on the stream silences the publish ack for JetStream producers too (their only
proof a message is stored) and still stores every request; a stream's subject transform
renames what it stored, not what it captures; the server cannot tell a request from a
JetStream publish (both are a publish with a reply subject), and a header is no filter a stream
can apply. ``ujobs nats status`` and the README's "Enqueue over NATS" say so.
"""  # noqa: E501

from __future__ import annotations

import re
from dataclasses import dataclass

from ujobs.errors import ConfigInvalidError

DEFAULT_PREFIX = "ujobs"
_PREFIX = re.compile(r"^[A-Za-z0-9_\-]{1,32}$")


@dataclass(frozen=True, slots=True)
class NatsNames:
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not _PREFIX.match(self.prefix):
            raise ConfigInvalidError(
                f"UJOBS_NATS_PREFIX: {self.prefix!r} is not a subject prefix "
                "(1-32 letters, digits, _ or -)",
                meta={"variable": "UJOBS_NATS_PREFIX"},
            )

    # -- request/reply ---------------------------------------------------------------------
    @property
    def enqueue_wildcard(self) -> str:
        return f"{self.prefix}.enqueue.>"

    @property
    def events_wildcard(self) -> str:
        return f"{self.prefix}.events.>"

    def enqueue_subject(self, job: str) -> str:
        return f"{self.prefix}.enqueue.{job}"

    def event_subject(self, name: str) -> str:
        return f"{self.prefix}.events.{name}"

    # -- the enqueue stream ----------------------------------------------------------------
    @property
    def js_enqueue_wildcard(self) -> str:
        return f"{self.prefix}.js.enqueue.>"

    @property
    def js_events_wildcard(self) -> str:
        return f"{self.prefix}.js.events.>"

    def js_enqueue_subject(self, job: str) -> str:
        return f"{self.prefix}.js.enqueue.{job}"

    def js_event_subject(self, name: str) -> str:
        return f"{self.prefix}.js.events.{name}"

    def rejected_subject(self, job: str) -> str:
        return f"{self.prefix}.rejected.{job}"

    @property
    def enqueue_stream(self) -> str:
        return f"{self.prefix.upper().replace('-', '_')}_ENQUEUE"

    @property
    def durable(self) -> str:
        return f"{self.prefix}-api"

    # -- settlements -----------------------------------------------------------------------
    @property
    def settled_wildcard(self) -> str:
        return f"{self.prefix}.settled.>"

    def settled_subject(self, job: str) -> str:
        return f"{self.prefix}.settled.{job}"

    @property
    def settled_stream(self) -> str:
        return f"{self.prefix.upper().replace('-', '_')}_SETTLED"

    def tail(self, subject: str, wildcard: str) -> str | None:
        """What ``>`` matched of ``subject`` under ``wildcard`` (None: not under it)."""
        head = wildcard[:-1]
        if not subject.startswith(head) or len(subject) == len(head):
            return None
        return subject[len(head) :]


__all__ = ["DEFAULT_PREFIX", "NatsNames"]
