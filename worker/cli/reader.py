"""``orchmem reader``: the reader worker of recall over the queue (see ``worker.remote``)."""

from __future__ import annotations

import logging

import click
from celery import signals as celery_signals

from orchmem.config import OrchmemError
from orchmem.models.embedding.embedders import get_embedder
from orchmem.worker.cli.common import Cli, pass_cli
from orchmem.worker.cli.ops import WAIT_BROKER, _shards
from orchmem.worker.ops.readiness import on_ready, ready_file_option
from orchmem.worker.runtime.app import NoReturnValues, create_app
from orchmem.worker.runtime.broker import wait_for_broker
from orchmem.worker.runtime.metrics import start_metrics
from orchmem.worker.runtime.shards import read_queue_name


@click.command()
@click.option("--shard", "shards", type=int, multiple=True,
              help="Serve these shards' read queues (repeatable). Default: all.")
@click.option("--concurrency", type=click.IntRange(1, 256),
              help="Threads (default: reader.concurrency).")
@click.option("--loglevel", default=None, help="Celery log level (default: settings.log_level).")
@click.option("--logfile", type=click.Path(dir_okay=False), help="Write the log here.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=0,
              help="Serve Prometheus metrics (recalls counted and timed) on this port "
                   "(default 0 = off).")
@WAIT_BROKER
@ready_file_option
@pass_cli
def reader(cli: Cli, shards: tuple[int, ...], concurrency: int | None, loglevel: str | None,
           logfile: str | None, metrics_port: int, wait_broker: float,
           ready_file: str | None) -> None:
    """Answer recalls sent by remote clients (MemoryClient(..., remote=True)) for the
    given shards, with read-only connections: run it on the host that owns their files."""
    settings = cli.settings
    chosen = _shards(cli, shards)
    try:
        app = create_app(settings, wait_for_broker(settings, wait_broker), readonly=True)
    except OrchmemError as exc:
        raise click.ClickException(str(exc)) from exc
    get_embedder(settings.embedding)  # once, shared by the threads, before the first task
    logging.getLogger("celery.app.trace").addFilter(NoReturnValues())
    app.conf.worker_send_task_events = settings.reader.task_events
    on_ready(celery_signals.worker_ready, ready_file)
    queues = [read_queue_name(settings, s) for s in chosen]
    if metrics_port:
        start_metrics(settings, app, f"reader-{'-'.join(map(str, chosen))}", metrics_port,
                      queues)
    argv = ["worker", "--queues", ",".join(queues),
            "--concurrency", str(concurrency or settings.reader.concurrency),
            "--pool", "threads",
            "--hostname", f"orchmem-reader{'-'.join(map(str, chosen))}@%h",
            "--loglevel", loglevel or settings.log_level, "--without-mingle",
            "--without-gossip"]
    if logfile:
        argv += ["--logfile", logfile]
    app.worker_main(argv)


COMMANDS = [reader]
