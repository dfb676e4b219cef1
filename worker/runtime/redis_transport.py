"""kombu's Redis transport with one synchronous Redis client per channel.

kombu's Redis channel builds a new ``redis.Redis`` object whenever it sends a command
outside its event loop (``conn_or_acquire``): a task message, a task event, a
worker's record of a delivered message and its acknowledgement. The constructor fills
a table of about 170 response callbacks: about 0.2 ms of CPU each time on a small
machine, several times per message. The client is only a handle on the channel's
connection pool, and redis-py's clients are thread-safe, so one per channel sends the
same commands on the same connections. A channel whose pool kombu replaced (it drops
its pools after a connection error) gets a new client on the new pool.

:func:`transport_for` names the transport for a broker URL (``broker_transport``):
these classes for ``redis://`` and ``sentinel://``, kombu's own for any other scheme.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis

_TRANSPORTS = {"redis": "orchmem.worker.runtime.redis_transport:Transport",
               "sentinel": "orchmem.worker.runtime.redis_transport:SentinelTransport"}


class _OneClient:
    """For kombu's Redis channels: the synchronous client, made once per pool."""

    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        make = super()._create_client  # type: ignore[misc]
        if asynchronous:
            return make(asynchronous=True)
        pool = self.pool  # type: ignore[attr-defined]
        client = self._sync_client
        if client is None or client.connection_pool is not pool:
            client = self._sync_client = make()
        return client


class Channel(_OneClient, kombu_redis.Channel):
    pass


class SentinelChannel(_OneClient, kombu_redis.SentinelChannel):
    pass


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel


def transport_for(broker_url: str) -> str | None:
    """The ``broker_transport`` for this URL; None: kombu's, from the URL's scheme."""
    return _TRANSPORTS.get(broker_url.split("://", 1)[0])
