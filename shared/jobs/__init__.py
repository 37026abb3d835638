"""Declaring work: ``job()`` and ``task()`` with their handles, ``t`` input schemas,
``Retry``, and ``define_api()`` with the registry an app hands to the system.

The map:

- ``app_context``: ``define_api(context=)``: the resources an app opens once per process for
  its runs (``run.ctx``).
- ``declaration_rules``: The rules a declaration is checked against where it is written.
- ``definition``: A job's declaration checked where it is written: ``build_definition`` answers
  the frozen ``JobDefinition`` a handle wraps, or refuses it.
- ``enqueue_target``: Where ``handle.enqueue()`` goes: the installed jobs facade, else the
  installed driver.
- ``job``: ``job()``: declare a job (as a decorator or a factory) and answer its handle.
- ``request_fields``: What a handle puts in an ``EnqueueRequest`` besides the input, read
  and checked once per call (a batch's requests share it).
- ``registry``: ``define_api()``: the one way an app hands its jobs and tasks to the system.
- ``result_read``: ``handle.result(job_id, timeout=)`` and ``enqueued.result(timeout=)``: a
  job's result once it settles, or its failure raised with its code.
- ``retry``: Retry policy: the backoff schedule, equal jitter, the final attempt, a stated
  Retry-After.
- ``snooze``: ``Snooze(seconds)``: run again later without spending an attempt, bounded.
- ``schema``: ``t``: the input-schema builder, over pydantic, and the one place inputs are
  validated.
- ``task``: ``task()``: a cron line, its IANA zone, and the jobs each occurrence puts on the
  queue.
- ``typeddicts``: Make Python 3.11's ``typing.TypedDict`` something pydantic can validate.
"""
