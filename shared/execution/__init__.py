"""One attempt of one claimed job: its body in the run's task, durable steps (``run``, ``sleep``,
``wait_for_event``), the outcome, the settle on the wire, ``on_settled``, progress, and the
``Run`` a body receives.

The map:

- ``attempt``: ``execute_job``: ONE attempt of one claimed job, from the stored input to the
  settled row.
- ``body``: The body of one attempt: the deadline, the worker's signal, abandonment.
- ``child_step_api``: the children's half of ``run.step`` (``Step`` inherits it).
- ``child_steps``: ``run.step.enqueue`` / ``run.step.wait`` / ``run.step.gather``: children as
  durable steps.
- ``inline_body``: A body driven inside the run's own task, and handed to a task of its own
  only when it must outlive the run.
- ``frozen_init``: ``slot_init``: a cheaper ``__init__`` for the frozen dataclasses the worker
  builds per job.
- ``on_settled``: ``on_settled``: the ONE hook told how a run ended, and the claim round's
  burial notice.
- ``outage``: When the store is away for a moment (a Postgres restart, a Redis failover): a
  settle is sent again while the lease lasts, and an attempt the outage failed is handed back
  uncounted.
- ``outcome``: How an attempt ended: the outcome table of § The deadline cancels, in ONE place.
- ``progress``: ``run.progress(done, total, note=None)``: how far a run has got, written through
  the driver.
- ``run``: What a job body receives (``Run``) and what ``on_settled`` is told (``Settled``).
- ``scope``: The context a job's code runs under: its declared tenant, its trace, the app's
  ``ctx``.
- ``settle``: Settling an attempt: the failure verdict, the ack/nack on the wire, and the
  worker's two settles that never run a body (``refuse_job``, ``hand_back``).
- ``step_output``: What a step stores: its result as JSON, read back — or
  ``X_STEP_OUTPUT_INVALID``.
- ``steps``: ``run.step``: durable steps that replay from storage.
- ``store_loss``: A store that came back empty under a live worker: ONE error naming it, not a
  warning per row.
"""
