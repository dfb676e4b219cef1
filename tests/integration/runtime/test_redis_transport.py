"""worker/runtime/redis_transport.py: a kombu channel sends with one Redis client object, made
again only when kombu replaced the channel's connection pool."""

from __future__ import annotations

from typing import Any

from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.redis_transport import SentinelTransport, Transport, transport_for


def test_a_channel_keeps_one_client_until_its_pool_is_replaced(isolated: Any) -> None:
    app = create_app(isolated(shards=1))
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, Transport)
        channel = conn.default_channel
        first = channel._create_client()
        assert channel._create_client() is first
        assert channel._create_client(asynchronous=True) is not first  # the event loop's
        with channel.conn_or_acquire() as client:
            assert client is first and client.ping()
        channel._disconnect_pools()  # what kombu does after a connection error
        again = channel._create_client()
        assert again is not first and again.connection_pool is channel.pool
        assert again.ping()


def test_every_message_still_arrives_through_the_shared_client(isolated: Any) -> None:
    app = create_app(isolated(shards=1))
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("orchmem-transport-test")
        try:
            for n in range(20):
                queue.put({"n": n})
            got = [queue.get(timeout=5) for _ in range(20)]
            for message in got:
                message.ack()
            assert [m.payload["n"] for m in got] == list(range(20))
        finally:
            queue.clear()
            queue.close()


def test_the_transport_is_chosen_by_the_urls_scheme() -> None:
    assert transport_for("redis://127.0.0.1:6379/0") == \
        f"{Transport.__module__}:{Transport.__name__}"
    assert transport_for("sentinel://127.0.0.1:26379;sentinel://127.0.0.1:26380") == \
        f"{SentinelTransport.__module__}:{SentinelTransport.__name__}"
    assert transport_for("rediss://127.0.0.1:6380/0") is None  # kombu's own, with TLS
    assert transport_for("memory://") is None
