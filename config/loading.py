"""Loading settings: the TOML file, then ``ORCHMEM_*`` variables, then explicit overrides.

Precedence, highest first: overrides (CLI flags), environment variables (see
:mod:`orchmem.config.environ`), the TOML file, then the defaults declared in
:mod:`orchmem.config.settings`. The TOML file is the first of: ``--config`` (the
``config_path`` argument), ``$ORCHMEM_CONFIG``, ``orchmem.toml`` in the current
directory. Settings are built here, on request, never at import time.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchmem.config.environ import EnvironSource, check_unknown_env
from orchmem.config.errors import ConfigError
from orchmem.config.settings import Settings, deep_merge, format_errors
from orchmem.config.telemetry import check_otel_env


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    environ: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build the settings from a TOML file, ``ORCHMEM_*`` variables and ``overrides``.

    ``config_path`` defaults to ``$ORCHMEM_CONFIG``, then to ``./orchmem.toml`` when
    that file exists (:func:`config_file`); without any, only the environment and the
    defaults apply. ``environ`` defaults to ``os.environ``. Raises :class:`ConfigError`
    naming every bad key, where it came from, and the likely key for a misspelt one,
    or the ``OTEL_*`` variable whose value is malformed (:mod:`orchmem.config.telemetry`).
    """
    environ = dict(os.environ if environ is None else environ)
    check_unknown_env(environ)
    check_otel_env(environ)
    toml_path = config_file(config_path, environ)
    values = read_toml(toml_path) if toml_path is not None else {}
    from_env = EnvironSource(Settings, environ)()
    values = deep_merge(deep_merge(values, from_env), overrides)
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        origin = [str(toml_path)] if toml_path is not None else []
        origin += ["ORCHMEM_* variables"] if from_env else []
        where = f" (from {' and '.join(origin)})" if origin else ""
        raise ConfigError(format_errors(exc, model=Settings, where=where)) from exc
    settings._config_path = toml_path.resolve() if toml_path is not None else None
    return settings


#: The settings file looked for in the current directory when none is named.
LOCAL_CONFIG = "orchmem.toml"


def config_file(config_path: str | os.PathLike[str] | None,
                environ: dict[str, str]) -> Path | None:
    """The settings file to read: ``config_path``, ``$ORCHMEM_CONFIG``, or
    ``./orchmem.toml`` if it exists; None when there is none."""
    path = config_path or environ.get("ORCHMEM_CONFIG") or None
    if path:
        return Path(path).expanduser()
    local = Path.cwd() / LOCAL_CONFIG
    return local if local.is_file() else None


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict; raises ConfigError if missing or invalid."""
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
