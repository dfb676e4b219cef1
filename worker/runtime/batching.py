"""The batching shard worker: deliveries waiting together are applied together.

A consumer bootstep (:class:`BatchingStep`) puts a :class:`Gate` between Celery's
task strategies and the pool. Every delivery the worker receives (it prefetches up to
``worker.batch_max``) waits in the gate, in arrival order; the gate hands the pool
one job at a time:

- deliveries from a control queue first (a backlog of write-backs never delays a
  control task by more than the job running now);
- otherwise the oldest delivery, and with it, when it is a ``batchable`` write or a
  ``read_only`` task (a bulletin), every waiting delivery of the same batchable task
  and every read-only one that can join without changing any orchestrator's order
  (at most ``batch_max``; :func:`pick`): one pool job (:func:`run_batch`) that applies
  the writes as one batch (:func:`orchmem.tasks.batch.apply_batch`) and stores their
  results, then runs the reads one by one after its commit, storing each one's result
  when it is built; then the gate acknowledges the job's messages, after the commit,
  in one Redis transaction (:mod:`.batch_acks`);
- any other task alone, through Celery's own request (results, events, acks as
  always).

No waiting for more: the batch is what arrived while the previous job ran, so a quiet
queue sees no added latency and a busy one gets large batches.

Order after a crash: while one job runs nothing else is in the pool, so when its child
is killed the gate runs the same job again (its messages were never acknowledged;
receipts make each task apply once) before anything that arrived after it. When the
whole worker is killed, the broker restores its unacknowledged messages in reverse;
a redelivered message waits ``redelivery_wait_ms`` for the others, and the gate puts
redelivered messages back in publish order (the ``orchmemSentAt`` header every
publish carries) before it runs them.

Celery's own mechanisms only: a consumer bootstep, the tasks' strategies (built for a
consumer whose ``on_task_request`` is the gate), the pool's ``apply_async`` and the
requests' ``acknowledge``. Off (one message at a time, prefetch 1) when :func:`batch_size`
is 1 (``batch_max = 1``, ``max_tasks_per_child = 1``, or the ``solo`` pool).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from billiard.einfo import ExceptionInfo
from billiard.exceptions import WorkerLostError
from celery import bootsteps
from celery.exceptions import TaskRevokedError
from celery.worker.request import Request
from celery.worker.state import task_ready

from orchmem.config import Settings
from orchmem.tasks.batch import (
    RETRY,
    SUCCESS,
    Outcome,
    Waiting,
    apply_batch,
    orchestrator_of,
    run_one,
)
from orchmem.tasks.bulletin import snapshots_later
from orchmem.worker.runtime.app import OrchmemCelery
from orchmem.worker.runtime.batch_acks import acknowledge_together
from orchmem.worker.runtime.batch_results import store_results

logger = logging.getLogger(__name__)

#: The app of this worker process, for :func:`run_batch` in its pool children (forked
#: from it, so they inherit it).
_APP: OrchmemCelery | None = None

SENT_AT_HEADER = "orchmemSentAt"


def batch_size(settings: Settings) -> int:
    """The largest batch this worker takes; 1 = batching off.

    ``worker.batch_max``, but never more tasks than a child may run
    (``max_tasks_per_child``), and at most 4 per second of ``visibility_timeout_s``: a
    prefetched message waits in the gate for up to two batches, and one not
    acknowledged within the timeout is handed out again (a duplicate, answered from
    its receipt, but a cascade of them when the timeout is a few seconds)."""
    worker = settings.worker
    if worker.pool != "prefork":
        return 1
    size = min(worker.batch_max, 4 * worker.visibility_timeout_s)
    if worker.max_tasks_per_child:
        size = min(size, worker.max_tasks_per_child)
    return max(1, size)


def install(app: OrchmemCelery) -> bool:
    """Make this worker batch (before it starts); False when batching is off."""
    global _APP
    size = batch_size(app.settings)
    if size <= 1:
        return False
    _APP = app
    # Concurrency is 1: the prefetch is what may wait in the gate while a batch runs.
    # Not more: with twice the batch, the consumer is still fetching while a batch runs,
    # and a worker killed then loses the message between kombu's BRPOP and its unacked
    # record (kombu #305) far more often (test_batch_kill lost one); with one batch's
    # worth it fetches nothing while a full batch runs.
    app.conf.worker_prefetch_multiplier = size
    app.steps["consumer"].add(BatchingStep)
    return True


class BatchingStep(bootsteps.StartStopStep):
    """Routes every task strategy of the consumer through a :class:`Gate`."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, c: Any, **kwargs: Any) -> None:
        super().__init__(c, **kwargs)
        self.gate: Gate | None = None

    def start(self, c: Any) -> None:
        worker = c.app.settings.worker
        self.gate = Gate(c.pool, c.timer, batch_size(c.app.settings),
                         worker.redelivery_wait_ms / 1000, c.app.tasks)
        proxy = _ConsumerWithGate(c, self.gate.submit)
        for name, task in c.app.tasks.items():
            c.strategies[name] = task.start_strategy(c.app, proxy)

    def stop(self, c: Any) -> None:
        # The connection is going: what waits here was not acknowledged, and the
        # broker gives it back (the batch running now finishes or is redelivered).
        if self.gate is not None:
            logger.info("batching gate stopped with %d waiting", len(self.gate.data))
            self.gate.drop()

    shutdown = stop


class _ConsumerWithGate:
    """The consumer as a strategy sees it, except that ready requests go to the gate."""

    def __init__(self, consumer: Any, on_task_request: Callable[[Request], None]) -> None:
        self._consumer = consumer
        self.on_task_request = on_task_request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


class Gate:
    """Deliveries in arrival order, handed to the pool one job at a time."""

    def __init__(self, pool: Any, timer: Any, batch_max: int, redelivery_wait_s: float,
                 tasks: Any) -> None:
        self.pool, self.timer, self.tasks = pool, timer, tasks
        self.batch_max = batch_max
        self.redelivery_wait_s = redelivery_wait_s
        self.control: deque[Request] = deque()
        self.data: deque[Request] = deque()
        self.running: list[Request] | None = None
        self._pumping = False
        self._hold_until = 0.0

    def submit(self, request: Request) -> None:
        routing_key = str((request.delivery_info or {}).get("routing_key") or "")
        if routing_key.endswith(".control"):
            self.control.append(request)
        else:
            self.data.append(request)
            if _redelivered(request) and self._hold_until == 0.0 and self.redelivery_wait_s:
                self._hold_until = time.monotonic() + self.redelivery_wait_s
                self.timer.call_after(self.redelivery_wait_s, self.pump)
        self.pump()

    def drop(self) -> None:
        self.control.clear()
        self.data.clear()
        self.running = None

    def pump(self) -> None:
        """Start the next job when none runs (a loop: a pool may answer at once)."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self.running is None:
                job = self._next()
                if not job:
                    return
                self._start(job)
        finally:
            self._pumping = False

    def _next(self) -> list[Request]:
        if self.control:
            return [self.control.popleft()]
        if not self.data or time.monotonic() < self._hold_until:
            return []
        if self._hold_until:
            self._hold_until = 0.0
            self._restore_publish_order()
        taken = pick([(r.name, _orchestrator_of(r)) for r in self.data], self.batch_max,
                     self._batchable, reads=self._read_only)
        job = [self.data[i] for i in taken]
        for i in reversed(taken):
            del self.data[i]
        return job

    def _restore_publish_order(self) -> None:
        """Redelivered messages at the head, sorted by the time they were sent."""
        head: list[Request] = []
        while self.data and _redelivered(self.data[0]):
            head.append(self.data.popleft())
        head.sort(key=_sent_at)
        self.data.extendleft(reversed(head))

    def _batchable(self, name: str) -> bool:
        return bool(getattr(self.tasks.get(name), "batchable", False))

    def _read_only(self, name: str) -> bool:
        return bool(getattr(self.tasks.get(name), "read_only", False))

    def _start(self, job: list[Request]) -> None:
        self.running = job
        if len(job) == 1 and not self._batchable(job[0].name):
            self._start_single(job[0])
        else:
            self._start_batch(job)

    def _finished(self, job: list[Request]) -> None:
        if self.running is job:
            self.running = None
            self.pump()

    def _again(self, job: list[Request]) -> None:
        """The job's child died: run the same job again, before anything after it."""
        logger.warning("pool child lost running %d task(s) (%s): running them again",
                       len(job), job[0].name)
        self.data.extendleft(reversed(job))
        self._finished(job)

    def _start_single(self, request: Request) -> None:
        job = self.running
        assert job is not None
        on_success, on_failure = request.on_success, request.on_failure

        def succeeded(*args: Any, **kwargs: Any) -> None:
            try:
                on_success(*args, **kwargs)
            finally:
                self._finished(job)

        def failed(exc_info: ExceptionInfo, *args: Any, **kwargs: Any) -> None:
            if _worker_lost(exc_info):
                self._again(job)
                return
            try:
                on_failure(exc_info, *args, **kwargs)
            finally:
                self._finished(job)

        request.on_success = succeeded
        request.on_failure = failed
        try:
            request.execute_using_pool(self.pool)
        except TaskRevokedError:
            self._finished(job)

    def _start_batch(self, job: list[Request]) -> None:
        # As Celery's own path does before a task runs: an expired (a bulletin nobody
        # waits for any more) or revoked delivery is acknowledged, stored as REVOKED
        # and left out.
        job[:] = [r for r in job if not r.revoked()]
        if not job:
            self._finished(job)
            return
        items = [Waiting(id=r.id, kwargs=dict(r._payload[1]), request=dict(r.request_dict))
                 for r in job]
        limit = max((r.time_limits[0] or r.task.time_limit or 0) for r in job) or None

        def accepted(pid: int, time_accepted: float) -> None:
            for request in job:
                request.on_accepted(pid, time_accepted)

        def done(states: list[str]) -> None:
            try:
                for request, state in zip(job, states, strict=True):
                    task_ready(request, successful=state == SUCCESS)
                acknowledge_together(job)
                for request, state in zip(job, states, strict=True):
                    request.send_event("task-succeeded" if state == SUCCESS else
                                       "task-retried" if state == RETRY else "task-failed")
            finally:  # a failure here must not leave the gate waiting for this job
                self._finished(job)

        def failed(exc_info: ExceptionInfo) -> None:
            if _worker_lost(exc_info):
                self._again(job)
                return
            for request in job:
                request.on_failure(exc_info)
            self._finished(job)

        self.pool.apply_async(run_batch, args=([r.name for r in job], items),
                              accept_callback=accepted, callback=done, error_callback=failed,
                              timeout=limit)


def pick(waiting: Sequence[tuple[str, str | None]], batch_max: int,
         batchable: Callable[[str], bool],
         reads: Callable[[str], bool] = lambda _: False) -> list[int]:
    """Positions of the next job among ``waiting`` ``(task name, orchestratorId)`` pairs,
    in arrival order: the oldest, and when it is a batchable write or a read-only task
    (``reads``), every later delivery (at most ``batch_max`` in all) that may run in the
    same job without changing the order of any orchestrator's deliveries:

    - a write of the job's one batchable task (the oldest's, or the first taken), when
      no delivery of its orchestrator that the job does not hold waits before it, and no
      read of its orchestrator was taken before it (a job runs its writes, committed
      together, then its reads: the read would see a write published after it);
    - a read-only task (a bulletin), when no delivery of its orchestrator that the job
      does not hold waits before it: it sees every earlier write of its orchestrator
      (committed by an earlier job, or by this one before it runs).

    Order matters per orchestrator (a bulletin must see the write-backs published
    before it, and none after); across orchestrators it does not. So orchestrator B's
    bulletin waiting between write-backs of A and C neither splits them into two jobs nor
    waits for a job of its own: the bulletins of a shard's orchestrators run together,
    right after the commit of the write-backs before them.
    A delivery whose orchestrator is unknown is a barrier (nothing after it joins).
    """
    if not waiting:
        return []
    name, first = waiting[0]
    taken = [0]
    if not batchable(name) and not reads(name):
        return taken
    writes = name if batchable(name) else None
    held: set[str | None] = set()  # nothing more of these joins
    read: set[str | None] = set() if writes else {first}  # no more writes of these
    for position in range(1, len(waiting)):
        if len(taken) >= batch_max:
            break
        other, orchestrator = waiting[position]
        if orchestrator is None:
            break
        if orchestrator in held:
            continue
        if reads(other):
            taken.append(position)
            read.add(orchestrator)
        elif batchable(other) and (writes is None or other == writes) and \
                orchestrator not in read:
            writes = other
            taken.append(position)
        else:
            held.add(orchestrator)
    return taken


def _orchestrator_of(request: Request) -> str | None:
    value = (request.kwargs or {}).get("orchestrator_id") \
        if isinstance(request.kwargs, dict) else None
    return value if isinstance(value, str) else None


def _worker_lost(exc_info: Any) -> bool:
    exc = getattr(exc_info, "exception", None)
    exc = getattr(exc, "exc", exc)  # ExceptionWithTraceback
    return isinstance(exc, WorkerLostError)


def _redelivered(request: Request) -> bool:
    return bool((request.delivery_info or {}).get("redelivered"))


def _sent_at(request: Request) -> int:
    value = request.request_dict.get(SENT_AT_HEADER)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def run_batch(names: list[str], items: list[Waiting]) -> list[str]:
    """In the pool child: apply the job's writes (``names[i]`` is the task of
    ``items[i]``; the batchable ones are one task's) as one batch and run its reads one
    by one, each as its own task; return the states in job order (the parent
    acknowledges the messages).

    A read waits for no write it does not follow: the reads of an orchestrator with no
    write in the job run first, and each orchestrator's run right after the commit of
    its own writes, before the next orchestrator's writes. Each read's result is stored
    as soon as it is built (its caller waits for it: a bulletin), the first one with the
    results of the writes it follows (in two round trips, :mod:`.batch_results`). The
    bulletins' snapshot files are written once every result is stored
    (:func:`~orchmem.tasks.bulletin.snapshots_later`)."""
    assert _APP is not None, "batching.install() runs before the pool starts"
    job = _Job(_APP.backend, [_APP.tasks[name] for name in names], items)
    writes = job.writes
    written = {orchestrator_of(items[i]) for i in writes}
    with snapshots_later():
        job.read(lambda orchestrator: orchestrator not in written)
        if writes:
            apply_batch(job.tasks[writes[0]], [items[i] for i in writes],
                        committed=lambda at, done: job.committed([writes[i] for i in at],
                                                                 done))
        job.read(lambda _: True)  # none left, unless a write had no orchestrator
    return job.states()


class _Job:
    """A pool job's outcomes, filled as its writes commit and its reads run.

    A result store that fails (Redis gone for good) fails the job as before, but only
    once every write of the job is applied (:meth:`states` raises it): the gate then
    acknowledges the messages as failed, and none may be acknowledged unapplied."""

    def __init__(self, backend: Any, tasks: list[Any], items: list[Waiting]) -> None:
        self.backend, self.tasks, self.items = backend, tasks, items
        #: The positions of the job's writes (batchable tasks), in job order.
        self.writes = [i for i, task in enumerate(tasks) if getattr(task, "batchable", False)]
        self.outcomes: list[Outcome | None] = [None] * len(items)
        self.error: Exception | None = None

    def committed(self, positions: list[int], done: list[Outcome]) -> None:
        """One orchestrator's writes are committed: run its reads, store the results.

        The writes' results are stored with its first read's (one store, not two, before
        that read's caller has it), or alone when it has none in the job."""
        for position, outcome in zip(positions, done, strict=True):
            self.outcomes[position] = outcome
        orchestrator = orchestrator_of(self.items[positions[0]])
        self.read(lambda other: other == orchestrator,
                  stored_with=([self.items[i] for i in positions], done))

    def read(self, which: Callable[[str | None], bool],
             stored_with: tuple[list[Waiting], list[Outcome]] = ([], [])) -> None:
        """Run, in job order, the reads not run yet of the orchestrators ``which`` picks;
        ``stored_with``: results to store with the first read's (or after none ran)."""
        writes = set(self.writes)
        items, outcomes = stored_with
        for position, task in enumerate(self.tasks):
            item = self.items[position]
            if self.outcomes[position] is None and position not in writes \
                    and which(orchestrator_of(item)):
                outcome = run_one(task, item)
                self.outcomes[position] = outcome
                self._store([*items, item], [*outcomes, outcome])
                items, outcomes = [], []
        if items:
            self._store(items, outcomes)

    def _store(self, items: list[Waiting], outcomes: list[Outcome]) -> None:
        try:
            store_results(self.backend, items, outcomes)
        except Exception as exc:  # raised by states(), after the whole job
            self.error = self.error or exc

    def states(self) -> list[str]:
        if self.error is not None:
            raise self.error
        return [outcome.state for outcome in self.outcomes if outcome is not None]
