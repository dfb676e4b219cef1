"""A worker that survives losing its broker while it holds unacknowledged messages.

When the consumer loses the broker, Celery closes the lost connection twice: in
``Connection.collect()`` and again in ``Connection.close()``. kombu's Redis channel (5.7)
first reads the reply of a BRPOP it has in flight; on a lost broker that raises, before
the channel has restored its unacknowledged messages, and the transport closes the
connection's other channels in a loop the first failure ends. ``collect()`` then lets
go of the transport, and the second close's restore needs it: an ``AttributeError``
Celery does not expect there ("Unrecoverable error"), and the worker stops for good.
It takes a BRPOP in flight, a message not acknowledged yet and the event channel
noticing the loss first; test_sentinel and test_broker_crash met it a few times in a
hundred runs.

:class:`Consumer` closes each channel of the lost connection first, while the
transport is still attached, each until it is closed (:func:`close_channels`). Their
restore fails on a lost broker either way; the messages stay in the broker's unacked
set and come back after the visibility timeout, and receipts answer any that were
already applied. Then Celery's own handling goes on as before.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.utils.threads import bound_open_broker_sockets
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection

logger = logging.getLogger(__name__)

#: A Redis channel closes in at most two tries (the first may stop at the BRPOP reply).
CLOSE_TRIES = 3
#: As Celery bounds its own teardown's reads: a broker gone silent (no RST) must not
#: hold a close for the transport's socket_timeout.
TEARDOWN_SOCKET_TIMEOUT_S = 5.0


def close_channels(connection: Connection) -> int:
    """Close every open channel of a lost ``connection``; returns how many were open."""
    bound_open_broker_sockets(connection, TEARDOWN_SOCKET_TIMEOUT_S)
    transport = connection.transport
    channels = list(getattr(transport, "channels", None) or ())
    errors = tuple(connection.connection_errors) + tuple(connection.channel_errors)
    opened = 0
    for channel in channels:
        opened += not getattr(channel, "closed", True)
        for _ in range(CLOSE_TRIES):
            if getattr(channel, "closed", True):
                break
            try:
                channel.close()
            except errors as exc:
                logger.debug("closing a channel of the lost connection: %r", exc)
    return opened


class Consumer(CeleryConsumer):
    """Celery's consumer, closing a lost connection's channels before Celery does."""

    def on_connection_error_after_connected(self, exc: Any) -> None:
        if self.connection is not None:
            try:
                close_channels(self.connection)
            except Exception as error:  # never worse than Celery's own handling
                logger.warning("closing the lost connection's channels failed: %r", error)
        super().on_connection_error_after_connected(exc)
