"""Shared by the benchmarks: this run's worker and Redis processes, their RSS and CPU time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def _pids(wanted: Callable[[Path, bytes], bool]) -> list[int]:
    """Processes whose ``wanted(/proc/<pid>, command line)`` is true."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                if wanted(entry, cmdline):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def worker_pids(config: Path) -> list[int]:
    """This run's worker processes (parents and pool children: the ones started with
    ``ORCHMEM_CONFIG=config``), not another run's on the same machine."""
    marker = f"ORCHMEM_CONFIG={config}".encode()
    return _pids(lambda entry, cmdline: b"orchmem.worker worker" in cmdline
                 and marker in (entry / "environ").read_bytes().split(b"\0"))


def redis_pids(url: str) -> list[int]:
    port = url.rsplit(":", 1)[1].split("/")[0].encode()
    return _pids(lambda _, cmdline: b"redis-server" in cmdline and b":" + port in cmdline)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` so far (``/proc/<pid>/stat``)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def cpu_now(workers: list[int], redis: list[int]) -> dict[str, float]:
    own = os.times()
    return {"workers": cpu_seconds(workers), "redis": cpu_seconds(redis),
            "benchmark": own.user + own.system}


def parent_pid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def cpu_by_part(workers: list[int], redis: list[int]) -> dict[str, float]:
    """CPU seconds so far of the worker parents (consumer, gate, acks), their pool
    children (the tasks), Redis and this process (the benchmark's client)."""
    parents = [pid for pid in workers if parent_pid(pid) not in workers]
    own = os.times()
    return {"worker_parent": cpu_seconds(parents),
            "worker_children": cpu_seconds([p for p in workers if p not in parents]),
            "redis": cpu_seconds(redis), "benchmark": own.user + own.system}


def runqueue_wait_s(pids: list[int]) -> float:
    """Seconds the threads of ``pids`` have spent runnable but waiting for a core
    (``/proc/<pid>/task/<tid>/schedstat``, second field): how much a part waits for
    the CPU rather than runs. Threads that ended are not counted."""
    total = 0
    for pid in pids:
        try:
            threads = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for thread in threads:
            try:
                total += int((thread / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return total / 1e9


def wait_now(workers: list[int], redis: list[int]) -> dict[str, float]:
    """:func:`runqueue_wait_s` of the workers, Redis and this process."""
    return {"workers": runqueue_wait_s(workers), "redis": runqueue_wait_s(redis),
            "benchmark": runqueue_wait_s([os.getpid()])}
