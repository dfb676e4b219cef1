"""Procfile, docker-compose.yml and the beat schedule: real commands, real settings."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from orchmem.config import load_settings
from orchmem.tasks.maintenance import FANOUT, JOBS
from orchmem.worker.cli.main import main
from orchmem.worker.runtime.schedule import beat_schedule

ROOT = Path(__file__).resolve().parents[3]


def _check_command(argv: list[str]) -> None:
    assert argv[0] in ("orchmem", "celery"), argv
    if argv[0] == "orchmem":
        command = main.get_command(click.Context(main), argv[1])
        assert command is not None, f"{argv[1]} is not an orchmem command"
        options = {opt for p in command.params for opt in getattr(p, "opts", [])}
        for arg in argv[2:]:
            if arg.startswith("--"):
                assert arg.split("=")[0] in options, f"{arg} is not an option of {argv[1]}"


def _substitute(value: str) -> str:
    """${VAR:-default} -> default, ${VAR:?message} -> a valid stand-in."""
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "user:password", value)


def test_every_procfile_line_is_a_real_orchmem_command() -> None:
    lines = [line for line in (ROOT / "Procfile").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    names = [line.split(":", 1)[0] for line in lines]
    assert names == ["broker", "worker0", "worker1", "beat", "flower"]
    for line in lines:
        _check_command(shlex.split(line.split(":", 1)[1]))


def test_compose_file_is_valid_and_its_commands_and_settings_are_real() -> None:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"redis", "worker-0", "worker-1", "beat", "flower", "api",
                             "reader"}
    redis = services["redis"]
    assert redis["image"].startswith("redis:7")
    assert "--appendonly" in redis["command"] and "yes" in redis["command"]
    assert "healthcheck" in redis
    for name, service in services.items():
        if name == "redis":
            continue
        _check_command(service["command"])
        assert "orchmem-data:/data" in service["volumes"]
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        env = {k: _substitute(str(v)) for k, v in service["environment"].items()}
        settings = load_settings(environ=env)  # unknown ORCHMEM_* keys would fail here
        assert settings.broker_url.startswith("redis://")
    assert services["flower"]["environment"]["ORCHMEM_FLOWER__BASIC_AUTH"]
    assert set(compose["volumes"]) == {"redis-data", "orchmem-data"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "torch==2.13.0" in dockerfile and "download.pytorch.org/whl/cpu" in dockerfile


@pytest.mark.parametrize("shards", [1, 3])
def test_beat_schedule_has_every_job_per_shard_at_its_interval(shards: int) -> None:
    settings = load_settings(environ={}, shards=shards, beat={
        "reembed_interval_s": 111, "ingest_scan_interval_s": 22, "gc_interval_s": 3333,
        "integrity_check_interval_s": 444, "bulletin_refresh_interval_s": 55})
    schedule = beat_schedule(settings)
    assert len(schedule) == len(JOBS) * shards
    expected = {"reembed": 111, "ingest": 22, "gc": 3333, "integrity": 444, "bulletin": 55,
                "outbox": 30}
    for shard in range(shards):
        for job, every in expected.items():
            entry = schedule[f"{job}-shard{shard}"]
            assert entry["task"] == FANOUT and entry["schedule"] == every
            assert entry["kwargs"] == {"shard": shard, "job": job}
            assert entry["options"]["queue"] == f"memory.{shard}.control"


def test_every_package_folder_is_installed() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for top in ("config", "models", "tasks", "worker", "examples"):
        for init in (ROOT / top).glob("**/__init__.py"):
            folder = init.parent.relative_to(ROOT)
            package = "orchmem." + ".".join(folder.parts)
            assert f'"{package}"' in text, f"{package} missing from [tool.setuptools] packages"
