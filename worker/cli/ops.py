"""Running orchmem: ``up``, ``broker``, ``worker``, ``beat``, ``check``."""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click
from celery import signals as celery_signals

from orchmem.config import OrchmemError
from orchmem.models.embedding.device import check_device
from orchmem.models.embedding.embedders import get_embedder
from orchmem.models.embedding.reembed import remaining
from orchmem.models.storage.db.database import Databases, known_orchestrators
from orchmem.models.storage.db.degraded import degraded_info
from orchmem.models.storage.delivery.deadletters import dead_letters
from orchmem.models.storage.search import ann
from orchmem.models.workspace.private import modes_report, private_dir
from orchmem.tasks.maintenance import DEADLETTER_RETRY, REEMBED
from orchmem.worker.cli.common import EXIT_UNAVAILABLE, Cli, emit, json_option, pass_cli
from orchmem.worker.cli.memory import wait_for
from orchmem.worker.ops.readiness import on_ready, ready_file_option
from orchmem.worker.ops.supervisor import Supervisor
from orchmem.worker.runtime import batching, events
from orchmem.worker.runtime.app import OrchmemCelery, connect_worker_signals, create_app
from orchmem.worker.runtime.broker import (
    FLOWER_USER,
    EmbeddedRedis,
    flower_basic_auth,
    flower_password_file,
    wait_for_broker,
)
from orchmem.worker.runtime.drain import drain
from orchmem.worker.runtime.metrics import start_metrics
from orchmem.worker.runtime.publish import publish
from orchmem.worker.runtime.schedule import beat_schedule
from orchmem.worker.runtime.shards import shard_queues


def _shards(cli: Cli, shards: tuple[int, ...]) -> list[int]:
    total = cli.settings.shards
    chosen = list(shards) or list(range(total))
    bad = [s for s in chosen if not 0 <= s < total]
    if bad:
        raise click.BadParameter(f"shards {bad} are not in 0..{total - 1} (shards = {total})",
                                 param_hint="--shard")
    return chosen


@click.command()
@click.option("--shard", "shards", type=int, multiple=True,
              help="Run workers for these shards only (repeatable). Default: all.")
@click.option("--no-beat", is_flag=True, help="Do not run the beat scheduler.")
@click.option("--flower", is_flag=True, help="Also run Flower (see `orchmem flower`).")
@click.option("--console", is_flag=True, help="Also serve the HTTP API with the web console "
              "at /console (see `orchmem serve`).")
@click.option("--no-reader", is_flag=True, help="Do not run a reader (`orchmem reader`): "
              "`orchmem recall` then loads the model itself.")
@pass_cli
def up(cli: Cli, shards: tuple[int, ...], no_beat: bool, flower: bool, console: bool,
       no_reader: bool) -> None:
    """Run the broker (when embedded), one worker per shard and beat, in the foreground.

    Ctrl-C or SIGTERM stops them all cleanly: workers finish their current task.
    """
    try:
        code = Supervisor(cli.settings, _shards(cli, shards), beat=not no_beat,
                          flower=flower, console=console, reader=not no_reader,
                          echo=click.echo).run()
    except OrchmemError as exc:
        raise click.ClickException(str(exc)) from exc
    raise SystemExit(code)


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default: a free one).")
@pass_cli
def broker(cli: Cli, port: int | None) -> None:
    """Run only the embedded Redis broker (AOF on) in the foreground.

    With broker_url set there is nothing to embed: it says so and waits for a signal,
    so one Procfile serves both set-ups.
    """
    settings = cli.settings
    stopping = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if settings.broker_url:
        click.echo(f"broker_url is set ({settings.broker_url.split('@')[-1]}): "
                   "nothing to embed; idle until stopped")
        while not stopping:
            time.sleep(0.5)
        return
    try:
        server = EmbeddedRedis.start(settings, port=port)
    except OrchmemError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"embedded Redis on 127.0.0.1:{server.port}, data in {server.directory}")
    try:
        while not stopping and server.process.poll() is None:
            time.sleep(0.5)
    finally:
        server.stop()
    if not stopping:
        raise click.ClickException(f"redis-server exited; see {server.directory / 'redis.log'}")


WAIT_BROKER = click.option(
    "--wait-broker", type=float, default=30.0, show_default=True, metavar="SECONDS",
    help="With the embedded broker: wait this long for it to start (process managers "
         "start everything at once).")


def _app(cli: Cli, wait_broker: float) -> OrchmemCelery:
    try:
        return create_app(cli.settings, wait_for_broker(cli.settings, wait_broker))
    except OrchmemError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command()
@click.option("--shard", "shards", type=int, multiple=True,
              help="Consume these shards' queues (repeatable). Default: all.")
@click.option("--loglevel", default=None, help="Celery log level (default: settings.log_level).")
@click.option("--logfile", type=click.Path(dir_okay=False), help="Write the log here.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on this port (default: worker.metrics_port; "
                   "0 = off).")
@WAIT_BROKER
@ready_file_option
@pass_cli
def worker(cli: Cli, shards: tuple[int, ...], loglevel: str | None, logfile: str | None,
           metrics_port: int | None, wait_broker: float, ready_file: str | None) -> None:
    """Run one Celery worker (concurrency 1) for the given shards."""
    settings = cli.settings
    check_device(settings.embedding)  # "cuda" without a GPU stops here, naming the field
    chosen = _shards(cli, shards)
    app = _app(cli, wait_broker)
    on_ready(celery_signals.worker_ready, ready_file)
    connect_worker_signals(app, chosen)
    batching.install(app)
    events.install(app)
    port = settings.worker.metrics_port if metrics_port is None else metrics_port
    if port:
        start_metrics(settings, app, f"worker-{'-'.join(map(str, chosen))}", port,
                      [q for s in chosen for q in shard_queues(settings, s)])
    argv = [
        "worker",
        "--queues", ",".join(q for s in chosen for q in shard_queues(settings, s)),
        "--concurrency", "1",
        "--pool", settings.worker.pool,
        "--hostname", f"orchmem-shard{'-'.join(map(str, chosen))}@%h",
        "--loglevel", loglevel or settings.log_level,
        "--without-mingle",
    ]
    if settings.worker.task_events:  # Flower's Tasks view (docs/operations/monitoring.md#flower)
        argv.append("--task-events")
    if logfile:
        argv += ["--logfile", logfile]
    app.worker_main(argv)


@click.command()
@click.option("--loglevel", default=None, help="Log level (default: settings.log_level).")
@WAIT_BROKER
@ready_file_option
@pass_cli
def beat(cli: Cli, loglevel: str | None, wait_broker: float, ready_file: str | None) -> None:
    """Run the beat scheduler (re-embedding, ingest scans, integrity checks, gc,
    bulletin refresh), at the intervals of the [beat] settings."""
    settings = cli.settings
    app = _app(cli, wait_broker)
    on_ready(celery_signals.beat_init, ready_file)
    app.conf.beat_schedule = beat_schedule(settings)
    schedule_dir = settings.root / "beat"
    private_dir(schedule_dir)
    app.Beat(schedule=str(schedule_dir / "schedule"), loglevel=loglevel or settings.log_level,
             max_interval=5).run()


@click.command()
@click.option("--address", help="Bind address (default: flower.address).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default: flower.port).")
@WAIT_BROKER
@pass_cli
def flower(cli: Cli, address: str | None, port: int | None, wait_broker: float) -> None:
    """Run Flower (task monitoring) against the same broker.

    Basic auth comes from flower.basic_auth ("user:password"); without it, Flower only
    starts bound to a loopback address, and asks for user "orchmem" with a password
    generated once and kept in <root>/flower/password (mode 0600).
    """
    settings = cli.settings
    bind = address or settings.flower.address
    auth = settings.flower.basic_auth
    if not auth and not is_loopback(bind):
        raise click.ClickException(
            f"refusing to start Flower on {bind} without authentication: set "
            "flower.basic_auth (ORCHMEM_FLOWER__BASIC_AUTH=user:password) or bind to 127.0.0.1")
    app = _app(cli, wait_broker)
    if not auth:
        click.echo(f"Flower asks for user {FLOWER_USER!r} and the password in "
                   f"{flower_password_file(settings)}", err=True)
    # Through the environment, not argv: a password on a command line shows in `ps`.
    os.environ["FLOWER_BASIC_AUTH"] = flower_basic_auth(settings)
    app.start(["flower", f"--address={bind}", f"--port={port or settings.flower.port}",
               "--purge_offline_workers=60"])


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--config", type=click.Path(dir_okay=False),
              help="Settings file (TOML) to check; overrides the global --config.")
@click.option("--fix", is_flag=True, help="Make the files and folders that other users "
              "could read private (0600 / 0700).")
@json_option
@pass_cli
def check(cli: Cli, config: str | None, fix: bool, as_json: bool) -> None:
    """Validate the settings, open every orchestrator's database, and look for files
    and folders under the root that other users could read.

    Exits non-zero, naming the problem, when the settings are invalid, any database
    is damaged, disabled or unreadable, or a file or folder is wider than 0600 / 0700
    (``--fix`` narrows them and says how many).
    """
    if config:
        cli.config = config
    settings = cli.settings  # a settings error exits here, naming the key
    databases = Databases(settings)
    found = known_orchestrators(settings)
    report: dict[str, Any] = {"ok": True, "root": str(settings.root), "orchestrators": {}}
    for orchestrator_id in sorted(found):
        entry: dict[str, Any]
        try:
            odb = databases.open(orchestrator_id, create=False)
            entry = {"status": "ok" if odb else "empty"}
            degraded = degraded_info(databases.workspace(orchestrator_id))
            if degraded is not None:
                entry = {"status": "degraded", "message": str(degraded.get("reason"))}
                report["ok"] = False
        except OrchmemError as exc:
            entry = {"status": exc.code, "message": str(exc)}
            report["ok"] = False
        damaged = ann.verify(databases.workspace(orchestrator_id))
        if damaged is not None:
            entry["annIndex"] = damaged
            entry.setdefault("message", f"vector index file {damaged}: `orchmem rebuild --ann "
                             f"--orch {orchestrator_id}` makes it again (recall searches "
                             "exactly meanwhile)")
            report["ok"] = False
        report["orchestrators"][orchestrator_id] = entry
    databases.close_all()
    lines = [f"settings ok (root {settings.root})"]
    for orchestrator_id, entry in report["orchestrators"].items():
        lines.append(f"{orchestrator_id}: {entry['status']}"
                     + (f" - {entry['message']}" if "message" in entry else ""))
    if not report["orchestrators"]:
        lines.append("no orchestrators yet")
    lines += _check_modes(cli, found, fix, report)
    emit(report, as_json, "\n".join(lines))
    if not report["ok"]:
        raise SystemExit(1)


def _check_modes(cli: Cli, orchestrators: list[str], fix: bool,
                 report: dict[str, Any]) -> list[str]:
    """Add the files and folders wider than private (``wideModes``, root-relative) and,
    with ``fix``, how many were narrowed (``fixed``) to ``report``; returns its lines."""
    wide, fixed = modes_report(cli.settings, orchestrators, fix=fix)
    report["wideModes"] = wide
    lines = []
    if fix:
        report["fixed"] = fixed
        lines.append(f"fixed {fixed} file(s) and folder(s) to private modes (0600 / 0700)")
    if wide:
        report["ok"] = False
        lines.append(f"{len(wide)} file(s) and folder(s) readable by other users "
                     + ("(not ours to change):" if fix else "(`orchmem check --fix` repairs):"))
        lines += [f"  {w['mode']}  {w['path']}" for w in wide]
    else:
        lines.append("files private (0600 / 0700)")
    return lines


@click.command()
@click.option("--orch", "orchestrator_ids", multiple=True, metavar="ID",
              help="Only this orchestrator (repeatable). Default: every one under the root.")
@click.option("--wait", is_flag=True, help="Wait and show progress until every vector is "
              "from the current embedder.")
@click.option("--timeout", type=float, default=3600.0, show_default=True,
              help="With --wait: give up after this many seconds.")
@json_option
@pass_cli
def reembed(cli: Cli, orchestrator_ids: tuple[str, ...], wait: bool, timeout: float,
            as_json: bool) -> None:
    """Re-embed memories whose vector is missing or from another model, in the background.

    Change `embedding.model` in the settings, restart the workers, then run this (beat
    also does it every `beat.reembed_interval_s`). Recall keeps answering meanwhile.
    """
    settings = cli.settings
    targets = list(orchestrator_ids) or known_orchestrators(settings)
    app = create_app(settings)
    databases = Databases(settings)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    published = {}
    for orchestrator_id in targets:
        _, result = publish(app, REEMBED, orchestrator_id, "reembed",
                            {"idempotencyKey": f"reembed-cli-{stamp}-{os.getpid()}"})
        published[orchestrator_id] = result.id
    if not wait:
        emit({"ok": True, "published": published}, as_json,
             "\n".join(f"{o}: re-embed published ({t})" for o, t in published.items())
             or "no orchestrators")
        return
    version = get_embedder(settings.embedding).version
    opened = {o: databases.open(o, create=False) for o in targets}
    total = sum(remaining(odb, version) for odb in opened.values() if odb)
    deadline = time.monotonic() + timeout
    left = total
    with click.progressbar(length=max(total, 1), label=f"re-embedding with {version}",
                           file=sys.stderr if as_json else None) as bar:
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            now_left = sum(remaining(odb, version) for odb in opened.values() if odb)
            bar.update(left - now_left)
            left = now_left
    report = {"ok": left == 0, "embedder": version, "total": total, "remaining": left}
    emit(report, as_json, f"done: {total - left} re-embedded, {left} remaining")
    if left:
        raise SystemExit(EXIT_UNAVAILABLE)


@click.command()
@click.option("--root", "demo_root", type=click.Path(file_okay=False),
              help="Folder for the demo's data, kept afterwards (default: the global --root, "
                   "else ./orchmem-demo).")
@click.option("--fresh", is_flag=True, help="Empty the folder first if it is not empty.")
@pass_cli
def demo(cli: Cli, demo_root: str | None, fresh: bool) -> None:
    """Run a scripted session of two orchestrators and print a trace.

    Starts an embedded Redis and a worker (nothing else needs to run), sends messages
    from several channels through the reference orchestrator in orchmem.examples, and
    shows what each wrote and recalled, the bulletin, a kept contradiction, a superseded
    preference and a denied cross-orchestrator request. The data stays in --root.
    """
    from orchmem.worker.ops.demo import prepare_root, run_demo

    # Not $ORCHMEM_ROOT: --fresh empties the folder, so only a folder named here is used.
    root = Path(demo_root or cli.root or "orchmem-demo").resolve()
    try:
        prepare_root(root, fresh)
    except FileExistsError as exc:
        raise click.ClickException(str(exc)) from exc
    cli.root = str(root)
    settings = cli.settings.model_copy(update={"root": root, "broker_url": ""})
    raise SystemExit(run_demo(settings, echo=click.echo))


@click.group()
def deadletter() -> None:
    """Tasks that crashed their worker max_deliveries times: list and retry them."""


@deadletter.command(name="list")
@click.option("--orch", "orchestrator_id", required=True, metavar="ID")
@json_option
@pass_cli
def deadletter_list(cli: Cli, orchestrator_id: str, as_json: bool) -> None:
    """List an orchestrator's dead letters (key, task, deliveries, error)."""
    odb = Databases(cli.settings).open(orchestrator_id, create=False)
    letters = dead_letters(odb) if odb else []
    lines = [f"{d['at']}  {d['key']}  {d['task']}  {d['deliveries']} deliveries  {d['error']}"
             for d in letters] or ["no dead letters"]
    emit({"orchestratorId": orchestrator_id, "deadLetters": letters}, as_json, "\n".join(lines))


@deadletter.command(name="retry")
@click.option("--orch", "orchestrator_id", required=True, metavar="ID")
@click.argument("key")
@json_option
@pass_cli
def deadletter_retry_command(cli: Cli, orchestrator_id: str, key: str, as_json: bool) -> None:
    """Publish dead letter KEY again (its receipt is reset, so it runs once more)."""
    app = create_app(cli.settings)
    _, result = publish(app, DEADLETTER_RETRY, orchestrator_id, "dlretry",
                        {"idempotencyKey": f"dlretry-{key[:150]}-{os.getpid()}", "key": key})
    value = wait_for(result, cli.settings.worker.wait_timeout_s, as_json)
    emit(value, as_json, f"{key}: published again ({value['retryTaskId']})")


@click.command(name="drain-queues")
@json_option
@pass_cli
def drain_queues(cli: Cli, as_json: bool) -> None:
    """Move the messages of shards above `shards` to shard 0's control queue.

    Run it after lowering `shards` (for example from 3 to 2) and restarting the
    workers: no worker reads the old queues any more. Shard 0's worker forwards each
    message to its orchestrator's queue; nothing is lost or applied twice. Raising
    `shards` needs no drain.
    """
    try:
        moved = drain(cli.settings, wait_for_broker(cli.settings, 5))
    except OrchmemError as exc:
        raise click.ClickException(str(exc)) from exc
    lines = [f"{queue}: {n} moved" for queue, n in moved.items()] or ["no stale queues"]
    emit({"ok": True, "moved": moved}, as_json, "\n".join(lines))


COMMANDS = [up, broker, worker, beat, flower, check, reembed, demo, deadletter, drain_queues]
