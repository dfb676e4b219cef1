"""The Celery app, built from settings by :func:`create_app` (never at import time).

JSON only (pickle is refused both ways), late acks with ``reject_on_worker_lost``,
prefetch 1, task events on for Flower, results in Redis with a TTL, and the shard
router. The app carries the settings and the per-process database registry that the
tasks use (``task.app.settings``, ``task.app.databases``).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Celery, signals
from kombu import Queue

from orchmem.config import MemoryValidationError, Settings
from orchmem.models.embedding.device import bulk_embedder
from orchmem.models.storage.db.database import Databases
from orchmem.models.telemetry.setup import configure
from orchmem.tasks.maintenance import FANOUT
from orchmem.tasks.publish import send
from orchmem.worker.runtime.broker import broker_url as resolve_broker_url
from orchmem.worker.runtime.redis_clients import broker_client
from orchmem.worker.runtime.redis_transport import transport_for
from orchmem.worker.runtime.shards import ShardRouter, all_queues, queue_name, read_queues

logger = logging.getLogger(__name__)

TASK_MODULES = (
    "orchmem.tasks.writeback",
    "orchmem.tasks.maintenance",
    "orchmem.tasks.edits",
    "orchmem.tasks.retention",
    "orchmem.tasks.ingest",
    "orchmem.tasks.bulletin",
    "orchmem.tasks.read",
    "orchmem.tasks.backups",
    "orchmem.tasks.execlog",
    "orchmem.tasks.reflect",
)


#: An answer and its expiry in one atomic step (never a list that outlives its TTL).
_REPLY_SCRIPT = "redis.call('LPUSH', KEYS[1], ARGV[1]); redis.call('EXPIRE', KEYS[1], ARGV[2])"


class OrchmemCelery(Celery):
    """A Celery app that knows orchmem's settings and this process's databases."""

    #: Task events carry no task results (memory text): worker/runtime/events.py.
    events_cls = "orchmem.worker.runtime.events:QuietEvents"

    def __init__(self, settings: Settings, broker: str, *, readonly: bool = False) -> None:
        super().__init__("orchmem", broker=broker, backend=broker, include=list(TASK_MODULES),
                         set_as_current=False)
        self.settings = settings
        #: A reader worker's app opens the files read-only (``orchmem reader``).
        self.databases = Databases(settings, readonly=readonly)
        self._replies: redis.Redis | None = None
        # Every process that sends or runs tasks builds an app: spans start here, or
        # nothing of the SDK is loaded (telemetry off, the default).
        configure(settings.telemetry)

    def reply(self, key: str, answer: str, ttl_s: int) -> None:
        """Push ``answer`` (JSON text) onto the list ``key`` that a client waits on,
        expiring after ``ttl_s`` if nobody takes it (tasks/read.py)."""
        if self._replies is None:
            self._replies = broker_client(self.conf.broker_url, self.settings,
                                          socket_connect_timeout=2, socket_timeout=5)
        self._replies.eval(_REPLY_SCRIPT, 1, key, answer, ttl_s)

    def queue_of(self, task: str, kwargs: dict[str, Any], shards: int | None = None) -> str:
        """The queue ``task`` with ``kwargs`` is routed to, under ``shards`` shards (default:
        the configured count): how a task tells a resharded message from a misrouted one."""
        settings = self.settings
        if shards is not None and shards != settings.shards:
            settings = settings.model_copy(update={"shards": shards})
        route = ShardRouter(settings)(task, (), kwargs, {})
        if route is None:
            raise MemoryValidationError(f"{task} has no orchestrator_id or shard to route by")
        return route["queue"]


#: A worker retries the result store for a while (its work is committed in SQLite
#: either way); an orchestrator's client gives up fast, so a broker outage costs a
#: message about a second, not twenty.
CLIENT_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.0, "interval_step": 0.25,
                       "interval_max": 0.5}


def celery_config(settings: Settings, broker: str, client: bool = False) -> dict[str, Any]:
    vt = settings.worker.visibility_timeout_s
    backend_options: dict[str, Any] = {"visibility_timeout": vt, **_sentinel(settings, broker)}
    if client:
        backend_options["retry_policy"] = CLIENT_RETRY_POLICY
    return {
        "broker_url": broker,
        # One Redis client object per channel, not one per publish and ack.
        "broker_transport": transport_for(broker),
        "result_backend": broker,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_send_task_events": settings.worker.task_events,
        # A publisher's task-sent event only when the shard workers send theirs: Flower
        # has nothing to pair it with otherwise (and it costs a publish of its own).
        "task_send_sent_event": settings.worker.task_events,
        "task_track_started": True,
        "result_expires": settings.worker.result_ttl_s,
        # Extended results would store each task's kwargs (a write-back's text) in the
        # result backend for result_ttl_s, beyond a hard forget's reach.
        "result_extended": False,
        "broker_transport_options": _transport_options(settings, broker),
        "result_backend_transport_options": backend_options,
        "redis_socket_connect_timeout": 2,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "worker_cancel_long_running_tasks_on_connection_loss":
            settings.worker.cancel_long_running_tasks_on_connection_loss,
        "task_time_limit": settings.worker.task_time_limit_s,
        "task_routes": (ShardRouter(settings),),
        "task_queues": _queues(settings),
        "task_default_queue": queue_name(settings, 0),
        "task_create_missing_queues": False,
        "worker_max_tasks_per_child": settings.worker.max_tasks_per_child or None,
        # The model load in a fresh child can take seconds; do not declare it dead.
        "worker_proc_alive_timeout": 120.0,
        # Survives losing the broker with messages not acknowledged yet (reconnect.py).
        "worker_consumer": "orchmem.worker.runtime.reconnect:Consumer",
        # A worker process owns its logging (--logfile, --loglevel); an orchestrator's
        # process, where the client lives, keeps its own.
        "worker_hijack_root_logger": not client,
        "timezone": "UTC",
        "enable_utc": True,
    }


def _transport_options(settings: Settings, broker: str) -> dict[str, Any]:
    """kombu's Redis transport options. kombu restores an unacked message after
    visibility_timeout, but only sweeps every interval * throttle seconds (100 s by
    default): sweep often enough that a message held by a killed worker comes back soon
    after the timeout."""
    vt = settings.worker.visibility_timeout_s
    return {
        "visibility_timeout": vt,
        "unacked_restore_interval": max(1, min(10, vt // 4)),
        "unacked_restore_throttle": 1,
        "socket_connect_timeout": 2,
        # A broker that vanishes without closing the connection must not hang a
        # publish forever (kombu's note on socket_timeout).
        "socket_timeout": 10,
        "health_check_interval": 10,
        # Queues are read in the order given (control first), not round-robin.
        "queue_order_strategy": "priority",
        **_sentinel(settings, broker),
    }


def _queues(settings: Settings) -> list[Queue]:
    """Every shard's write and control queues, then its read queue. A read is consumed
    without ack emulation (kombu keeps no unacked copy: one Redis transaction fewer per
    recall): a recall lost with its reader fails over to the caller's timeout, and a
    copy redelivered an hour later would answer nobody."""
    return [*(Queue(name, routing_key=name) for name in all_queues(settings)),
            *(Queue(name, routing_key=name, no_ack=True) for name in read_queues(settings))]


def _sentinel(settings: Settings, broker: str) -> dict[str, Any]:
    """With ``sentinel://`` URLs, kombu's transport and Celery's result backend both
    ask the sentinels for ``master_name`` (and again after a failover)."""
    if not broker.startswith("sentinel://"):
        return {}
    return {"master_name": settings.sentinel_master,
            "sentinel_kwargs": {"socket_connect_timeout": 2, "socket_timeout": 2}}


def create_app(settings: Settings, broker: str | None = None, *,
               client: bool = False, readonly: bool = False) -> OrchmemCelery:
    """A configured app; ``broker`` defaults to the configured or embedded broker.

    ``client=True`` is the orchestrator side: short retries, so an outage fails fast.
    Raises BrokerUnavailable when no broker URL can be found.
    """
    url = broker or resolve_broker_url(settings)
    app = OrchmemCelery(settings, url, readonly=readonly)
    app.conf.update(celery_config(settings, url, client=client))
    return app


def create_immediate_app(settings: Settings, databases: Databases | None = None
                         ) -> OrchmemCelery:
    """An app that runs every task in this process, at once (``task_always_eager``),
    against the real SQLite files: no broker, no worker, no result store.

    For an orchestrator developer's own tests and for orchmem's domain tests
    (``MemoryClient(..., immediate=True)``). ``databases`` shares the caller's open
    handles. Task failures are returned as results, as from a worker.
    """
    app = OrchmemCelery(settings, "memory://")
    app.conf.update(celery_config(settings, "memory://"))
    app.conf.update(task_always_eager=True, task_eager_propagates=False,
                    result_backend=None, task_store_eager_result=False)
    if databases is not None:
        app.databases = databases
    return app


class NoReturnValues(logging.Filter):
    """Keeps Celery's task log lines but never the value a task returned."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, dict) and "return_value" in record.args:
            record.args = {**record.args, "return_value": "<not logged>"}
        return True


def connect_worker_signals(app: OrchmemCelery, shards: list[int] | None = None) -> None:
    """Hooks of a worker process: called by ``orchmem worker``, never by clients.

    At start the worker asks for an outbox reconciliation of its shards, so requests
    recorded while it (or the broker) was down are published without waiting for beat.
    """

    def reconcile_on_start(**_: Any) -> None:
        for shard in shards or []:
            try:
                send(app, FANOUT, {"shard": shard, "job": "outbox"})
            except Exception as exc:  # the broker may be gone again: beat will do it
                logger.warning("outbox reconciliation at start not published: %s", exc)

    signals.worker_ready.connect(reconcile_on_start, weak=False,
                                 dispatch_uid="orchmem-outbox-on-start")

    def warm_up_child(**_: Any) -> None:
        # Load the embedding model before the child takes its first task, so that no
        # task (a bulletin with a 2 s budget, say) waits seconds for it.
        try:
            bulk_embedder(app.settings.embedding)
        except Exception as exc:  # logged; tasks fall back to full text, re-embed later
            logger.warning("embedding model not loaded at start: %s", exc)

    def quiet_task_results(**_: Any) -> None:
        # Celery logs each task's return value at INFO ("succeeded in …: {…}"): a
        # bulletin's text would go to the worker's log file, out of a hard forget's
        # reach. The value is left out; the rest of Celery's lines (received, retry,
        # failure) stay, and the pipeline logs one line per task (outcome, duration).
        logging.getLogger("celery.app.trace").addFilter(NoReturnValues())

    signals.after_setup_logger.connect(quiet_task_results, weak=False,
                                       dispatch_uid="orchmem-quiet-results")

    signals.worker_process_init.connect(warm_up_child, weak=False,
                                        dispatch_uid="orchmem-warm-up")
