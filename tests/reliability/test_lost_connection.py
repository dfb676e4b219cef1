"""The broker dies while the worker holds a message not acknowledged yet, with a BRPOP
in flight and an event channel open: the state in which Celery's teardown of the lost
connection met an AttributeError from kombu and stopped the worker (worker/runtime/reconnect.py).

A real redis-server, real kombu channels; the teardown is Celery's: ``collect()`` then
``close()``, after :func:`close_channels` as the worker's consumer runs it. (Without
``close_channels``, kombu 5.7's ``close()`` raises ``AttributeError: 'NoneType' object
has no attribute 'hostname'`` here.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kombu import Connection, Exchange, Queue
from orchmem_testing import RedisServer

from orchmem.worker.runtime.app import create_app
from orchmem.worker.runtime.reconnect import Consumer, close_channels


def test_a_lost_connection_holding_an_unacked_message_closes(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "broker").start()
    connection = Connection(server.url + "/0", transport_options={"visibility_timeout": 60})
    try:
        work = connection.default_channel
        queue = Queue("work", Exchange("work"), "work")
        queue(work).declare()
        connection.Producer(work).publish({"n": 1}, exchange="work", routing_key="work")
        held: list[object] = []
        connection.Consumer([queue], channel=work,
                            callbacks=[lambda body, message: held.append(message)]).consume()
        connection.drain_events(timeout=5)
        events = connection.channel()  # a fanout (pub/sub) channel, as Celery's events
        connection.Consumer([Queue("bcast", Exchange("bcast", type="fanout"),
                                   auto_delete=True)], channel=events).consume()
        work._brpop_start()  # the event loop's next BRPOP, in flight
        assert len(held) == 1 and len(work.qos._delivered) == 1 and work._in_poll

        server.kill()

        assert close_channels(connection) == 2
        assert work.closed and events.closed
        connection.collect(socket_timeout=5)  # Celery's teardown, as after a loss
        connection.close()  # raised AttributeError before close_channels
    finally:
        server.stop()


def test_the_worker_runs_the_consumer_that_closes_them(isolated: Any) -> None:
    app = create_app(isolated(broker_url="redis://127.0.0.1:1/0"))
    assert app.conf.worker_consumer == f"{Consumer.__module__}:{Consumer.__name__}"
