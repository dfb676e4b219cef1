"""A job's messages acknowledged together: one Redis transaction, not one per message.

kombu's Redis transport keeps each delivered message in an "unacked" hash and index
until it is acknowledged (so a killed worker's messages come back after the visibility
timeout); acknowledging one removes its two entries in a transaction of its own, one
round trip (and one new Redis client object) each. The gate acknowledges a job's
messages after its commit, all at once, and the pool child waits for the next job
meanwhile: for a batch of 36 that was 36 round trips between two jobs.
:func:`acknowledge_together` removes every message's entries with one ``ZREM`` and one
``HDEL`` in ONE ``MULTI``/``EXEC`` (all of them or, if it fails, none), then does
kombu's and Celery's in-process bookkeeping of an ack for each, as
``Request.acknowledge`` would. Any other transport, or messages from several channels:
each through ``Request.acknowledge``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery.worker.request import Request
from kombu.transport import virtual

logger = logging.getLogger(__name__)


def acknowledge_together(requests: Sequence[Request]) -> None:
    """Acknowledge ``requests`` not acknowledged yet (after the commit of their job)."""
    pending = [r for r in requests if not r.acknowledged]
    qos = _redis_qos(pending)
    if qos is None:
        for request in pending:
            request.acknowledge()
        return
    tags = [request.message.delivery_tag for request in pending]
    if qos.channel.closed:  # the connection was lost while the job ran
        _given_back(pending, "the channel that delivered them is closed")
        return
    try:
        with qos.pipe_or_acquire() as pipe:
            # kombu's _remove_from_indices, for every tag at once
            pipe.zrem(qos.unacked_index_key, *tags).hdel(qos.unacked_key, *tags).execute()
    except tuple(pending[0]._connection_errors) as exc:
        _given_back(pending, repr(exc))
        return
    for request, tag in zip(pending, tags, strict=True):
        virtual.QoS.ack(qos, tag)  # the channel's record of delivered messages
        request.message._state = "ACK"
        request.acknowledged = True


def _given_back(pending: Sequence[Request], reason: str) -> None:
    """As Celery's own ack does on a connection error (``ack_log_error``): logged; the
    broker gives the messages back after the visibility timeout, their receipts answer."""
    logger.error("acknowledging %d messages failed: %s", len(pending), reason)
    for request in pending:
        request.acknowledged = True


def _redis_qos(pending: Sequence[Request]) -> Any:
    """The one kombu Redis QoS holding every ``pending`` message as delivered and not
    acknowledged (a no-ack queue's are not held), or None (then one by one)."""
    if not pending:
        return None
    channels = {id(request.message.channel) for request in pending}
    qos = getattr(pending[0].message.channel, "qos", None)
    if len(channels) != 1 or not isinstance(qos, virtual.QoS) or \
            not all(hasattr(qos, name) for name in ("pipe_or_acquire", "unacked_key",
                                                    "unacked_index_key")):
        return None
    held = qos._delivered
    if held is None or any(request.message.delivery_tag not in held or request.message.acknowledged
           for request in pending):
        return None
    return qos
