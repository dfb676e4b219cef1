"""Several waiting deliveries of one batchable task, applied together (in a pool child).

A shard worker hands the deliveries of a task declared ``batchable`` that are waiting
together (``orchmem.worker.runtime.batching``) to :func:`apply_batch`; they may be of several
orchestrators.

1. Per orchestrator, each delivery that can go into a batch (its payload has a key, it
   is on its orchestrator's queue, within the size limit) has its receipt created, in
   ONE commit per orchestrator (:func:`receipts.begin_batch`), so a batch that
   crashes its worker is counted;
2. then every text of the payloads counted fresh is embedded in ONE model call for
   the whole job, across orchestrators (:mod:`batch_vectors`);
3. then, per orchestrator in publish order, the tasks run one after another, each
   through the whole :mod:`.pipeline`, inside ONE write transaction: each task's
   writes and receipt are a savepoint of it (a task that fails rolls back alone: a
   validation error is recorded as that task's rejection), and the one commit holds
   every task's receipt. A kill -9 before that commit leaves none of it; after it,
   all of it.

A delivery that cannot join a batch, or one delivered before without finishing (its
receipt exists: the previous batch crashed), runs on its own as without batching; so
does every task of a batch whose transaction fails (a storage error, a full disk):
after the rollback, each runs and is retried on its own. Each task's outcome is its
own: :class:`Outcome` per delivery, in input order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celery import signals
from celery.exceptions import Ignore, Retry

from orchmem.config import EmbeddingError, OrchmemError, StorageError, check_orchestrator_id
from orchmem.models.core.payloads import key_of
from orchmem.models.embedding import batch_vectors
from orchmem.models.embedding.device import bulk_embedder
from orchmem.models.storage.db.database import OrchestratorDB
from orchmem.models.storage.delivery import receipts
from orchmem.models.telemetry import meters, names, spans
from orchmem.models.writeback.reconcile import NEIGHBOURS
from orchmem.tasks.pipeline import check_size

if TYPE_CHECKING:
    from orchmem.tasks.base import MemoryTask

logger = logging.getLogger(__name__)

SUCCESS, FAILURE, RETRY, IGNORED = "SUCCESS", "FAILURE", "RETRY", "IGNORED"
#: Internal: the batch's transaction must be rolled back (then each task runs alone).
_ROLLBACK = "ROLLBACK"


@dataclass(frozen=True)
class Waiting:
    """One delivery handed to a batch: its task id, kwargs and Celery request dict."""

    id: str
    kwargs: dict[str, Any]
    request: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """What one delivery ended in: its result (SUCCESS), exception (FAILURE, RETRY)."""

    state: str
    value: Any = None


class _RolledBack(Exception):
    """Raised inside a batch's transaction to roll all of it back."""


def apply_batch(task: MemoryTask, waiting: Sequence[Waiting],
                committed: Callable[[list[int], list[Outcome]], None] | None = None,
                ) -> list[Outcome]:
    """Apply ``waiting`` (one task's deliveries, in publish order); one outcome each.

    Every delivery that can be counted is counted first (one commit per orchestrator),
    then the texts of those counted fresh are embedded in ONE model call for the whole
    job, across orchestrators; then each orchestrator's deliveries run, in order, and
    ``committed(positions, outcomes)`` is called once each orchestrator's have (their
    positions in ``waiting``): its commit is done, the next orchestrator's not begun.
    One span for the batch links the trace of every delivery it applied; each delivery
    keeps its own task span, in its sender's trace."""
    with spans.span(names.task_span(names.SPAN_BATCH, task.name), {
            names.MESSAGING_SYSTEM: names.MESSAGING_SYSTEM_VALUE,
            names.MESSAGING_OPERATION: "process", names.TASK: task.name,
            names.MESSAGING_BATCH_COUNT: len(waiting)}, kind="consumer",
            links=[spans.context_of(item.request) for item in waiting]):
        meters.batch_applied(task.name, len(waiting))
        return _apply_batch(task, waiting, committed)


def _apply_batch(task: MemoryTask, waiting: Sequence[Waiting],
                 committed: Callable[[list[int], list[Outcome]], None] | None,
                 ) -> list[Outcome]:
    groups: dict[Any, list[int]] = {}
    for position, item in enumerate(waiting):
        groups.setdefault(orchestrator_of(item), []).append(position)
    plans = [(positions, [(step, step.texts(task)) for step in
                          _plan(task, orchestrator_id, [waiting[p] for p in positions])])
             for orchestrator_id, positions in groups.items()]
    texts = [text for _, steps in plans for _, step_texts in steps for text in step_texts]
    outcomes: list[Outcome | None] = [None] * len(waiting)
    with _vectors_ahead(task, texts):
        for positions, steps in plans:
            done = [outcome for step, step_texts in steps
                    for outcome in step.apply(task, step_texts)]
            for position, outcome in zip(positions, done, strict=True):
                outcomes[position] = outcome
            if committed is not None:
                committed(positions, done)
    return [o for o in outcomes if o is not None]


def orchestrator_of(item: Waiting) -> str | None:
    """The delivery's ``orchestrator_id`` (None when it has none, or not a string)."""
    value = item.kwargs.get("orchestrator_id")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class _Alone:
    """A delivery that cannot be counted ahead (no orchestrator, a bad payload, a
    misrouted one): it runs, and fails or is forwarded, on its own."""

    item: Waiting

    def texts(self, task: MemoryTask) -> list[str]:
        return []

    def apply(self, task: MemoryTask, texts: list[str]) -> list[Outcome]:
        return [run_one(task, self.item)]


@dataclass(frozen=True)
class _Counted:
    """Consecutive deliveries of one orchestrator whose receipts :func:`_plan` created
    in one commit (``found``: :func:`receipts.begin_batch`'s answer for each)."""

    odb: OrchestratorDB
    run: list[tuple[str, Waiting]]
    found: list[str]

    def texts(self, task: MemoryTask) -> list[str]:
        """The texts to embed ahead: none when a delivery came back unfinished (it may
        be what crashed the model: each then embeds on its own)."""
        if receipts.AGAIN in self.found:
            return []
        return [text for (_, item), state in zip(self.run, self.found, strict=True)
                if state == receipts.FRESH
                for text in task.texts_ahead(self.odb, item.kwargs.get("payload"))]

    def apply(self, task: MemoryTask, texts: list[str]) -> list[Outcome]:
        """Run the deliveries; ``texts`` (:meth:`texts`) are ranked against the stored
        memories ahead, in one product for the run (:func:`batch_vectors.nearest_ahead`)."""
        with batch_vectors.nearest_ahead(self.odb, texts, NEIGHBOURS):
            return _apply_run(task, self.odb, self.run, self.found)


def _plan(task: MemoryTask, orchestrator_id: str | None,
          items: list[Waiting]) -> list[_Alone | _Counted]:
    """One orchestrator's deliveries as steps, each run counted (its receipts created)."""
    alone: list[_Alone | _Counted] = [_Alone(item) for item in items]
    if orchestrator_id is None:
        return alone
    try:
        check_orchestrator_id(orchestrator_id)
    except OrchmemError:
        return alone  # each reports it
    runs = list(_runs(task, orchestrator_id, items))
    if all(not run for run, _ in runs):
        return alone  # none is opened for a misrouted or bad delivery: it is not ours
    try:
        odb = task.open_db(orchestrator_id)
    except OrchmemError:
        return alone
    assert odb is not None  # create=True
    steps: list[_Alone | _Counted] = []
    for run, single in runs:
        if single is not None:
            steps.append(_Alone(single))
            continue
        try:
            found = receipts.begin_batch(odb, [(key, task.name) for key, _ in run])
        except OrchmemError:
            # A read-only or full folder: each task meets the error in its own run and
            # is retried, as without batching.
            steps += [_Alone(item) for _, item in run]
            continue
        steps.append(_Counted(odb, run, found))
    return steps


def _runs(task: MemoryTask, orchestrator_id: str,
          items: list[Waiting]) -> Iterator[tuple[list[tuple[str, Waiting]], Waiting | None]]:
    """Consecutive deliveries that can join a batch, with their keys; or one that
    cannot (bad payload, misrouted: it fails or is forwarded on its own)."""
    run: list[tuple[str, Waiting]] = []
    for item in items:
        key = _batch_key(task, orchestrator_id, item)
        if key is not None:
            run.append((key, item))
            continue
        if run:
            yield run, None
            run = []
        yield [], item
    if run:
        yield run, None


def _batch_key(task: MemoryTask, orchestrator_id: str, item: Waiting) -> str | None:
    payload = item.kwargs.get("payload")
    task.push_request(**item.request)
    try:
        if set(item.kwargs) != {"orchestrator_id", "payload"} or \
                task.misrouted(orchestrator_id) is not None:
            return None
        check_size(payload)
        return key_of(orchestrator_id, task.kind, payload)
    except OrchmemError:
        return None
    finally:
        task.pop_request()


def _apply_run(task: MemoryTask, odb: OrchestratorDB, run: list[tuple[str, Waiting]],
               found: list[str]) -> list[Outcome]:
    items = [item for _, item in run]
    if receipts.AGAIN in found:
        # Delivered before without finishing (a crashed batch) or twice in this one:
        # one by one, so a task that crashes the worker is counted and dead-lettered
        # alone; those counted by _plan are not counted again.
        return [run_one(task, item, counted=state == receipts.FRESH)
                for item, state in zip(items, found, strict=True)]
    # A run of one (the soak's shape: each orchestrator one write-back per job) takes
    # the same path: its receipt, data and result in one transaction, as savepoints,
    # instead of a transaction (and the table classes bound) for each of them.
    if len(items) > 1:
        odb.log.write("batch", task=task.name, size=len(items),
                      keys=[key for (key, _), state in zip(run, found, strict=True)
                            if state == receipts.FRESH])
    try:
        return _in_one_transaction(task, odb, items)
    except (_RolledBack, OrchmemError) as exc:
        # Nothing of the batch is committed: its cached index may hold rows that
        # were rolled back, so the handle is reopened.
        logger.warning("batch of %d %s for %s rolled back (%s); running them one by one",
                       len(items), task.name, odb.orchestrator_id, exc)
        task.databases.evict(odb.orchestrator_id)
        return [run_one(task, item, counted=True) for item in items]


def _in_one_transaction(task: MemoryTask, odb: OrchestratorDB,
                        items: list[Waiting]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with odb.write():
        for item in items:
            outcome = run_one(task, item, counted=True, batch=True)
            if outcome.state == _ROLLBACK:
                raise _RolledBack(str(outcome.value))
            outcomes.append(outcome)
    return outcomes


@contextmanager
def _vectors_ahead(task: MemoryTask, texts: list[str]) -> Iterator[None]:
    """:func:`batch_vectors.ahead` for ``texts``, when there are any and the model
    loads; otherwise nothing ahead (each task embeds, or fails, on its own)."""
    if not texts:
        yield
        return
    try:
        embedder = bulk_embedder(task.settings.embedding)
    except EmbeddingError:
        yield
        return
    with batch_vectors.ahead(embedder, texts):
        yield


def run_one(task: MemoryTask, item: Waiting, *, counted: bool = False,
            batch: bool = False) -> Outcome:
    """Run one delivery through the task's own body and pipeline, under its request.

    ``counted``: its receipt was created by :func:`receipts.begin_batch`; ``batch``:
    inside the batch's transaction (a storage error then rolls the batch back)."""
    task.push_request(**{**item.request, "id": item.id, "args": [], "kwargs": item.kwargs,
                         "called_directly": False, "orchmemCounted": counted,
                         "orchmemBatch": batch})
    # The signals Celery's own tracer sends around a task (metrics count on them).
    signals.task_prerun.send(sender=task, task_id=item.id, task=task, args=(),
                             kwargs=item.kwargs)
    outcome = Outcome(FAILURE)
    try:
        outcome = Outcome(SUCCESS, task.run(**item.kwargs))
    except Retry as exc:
        outcome = Outcome(_ROLLBACK if batch else RETRY, exc)
    except StorageError as exc:
        outcome = Outcome(_ROLLBACK if batch else FAILURE, exc)
    except Ignore:
        outcome = Outcome(IGNORED)
    except Exception as exc:  # the task's own failure, reported as its result
        outcome = Outcome(FAILURE, exc)
    finally:
        task.pop_request()
        signals.task_postrun.send(sender=task, task_id=item.id, task=task, args=(),
                                  kwargs=item.kwargs, retval=outcome.value,
                                  state=outcome.state)
    return outcome
