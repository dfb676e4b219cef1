"""A redis-py client for the broker, whatever form its URL takes.

Celery and kombu read ``broker_url`` themselves, ``sentinel://`` lists included (with
``master_name`` in the transport options, worker/runtime/app.py). orchmem's own direct uses
of the broker (the client's fast ping, the reader ping, queue depths, metrics, drain)
go through :func:`broker_client`, so a Sentinel deployment works for them too:

- ``redis://`` / ``rediss://`` / ``unix://``: ``redis.Redis.from_url``;
- ``sentinel://[:password@]host:port[/db];sentinel://host2:port...``: the sentinels
  are asked for the current master of ``settings.sentinel_master``, and asked again
  after a connection error, so a failover is followed without a restart. The password
  and db of the first URL are the master's (as kombu reads them).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

import redis
from redis.sentinel import Sentinel

from orchmem.config import Settings

#: The port a sentinel listens on when its URL names none.
SENTINEL_PORT = 26379


def sentinel_hosts(url: str) -> tuple[list[tuple[str, int]], str | None, int]:
    """(sentinel addresses, the master's password, db) of a ``sentinel://`` list."""
    parts = [urlparse(chunk) for chunk in url.split(";") if chunk]
    hosts = [(p.hostname or "localhost", p.port or SENTINEL_PORT) for p in parts]
    first = parts[0]
    password = unquote(first.password) if first.password else None
    path = first.path.strip("/")
    return hosts, password, int(path) if path.isdigit() else 0


def broker_client(url: str, settings: Settings, **options: Any) -> redis.Redis:
    """A client of the broker at ``url``; ``options`` are redis-py connection options
    (socket timeouts), used for the sentinels and the master alike."""
    if not url.startswith("sentinel://"):
        return redis.Redis.from_url(url, **options)
    hosts, password, db = sentinel_hosts(url)
    sentinel = Sentinel(hosts, sentinel_kwargs=dict(options), **options)
    return sentinel.master_for(settings.sentinel_master, password=password, db=db)
