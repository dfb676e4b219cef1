"""Loading settings: the TOML file, then ``ORCHMEM_*`` variables, then explicit overrides.

Precedence, highest first: overrides (CLI flags), environment variables (see
:mod:`orchmem.config.environ`), the TOML file (``--config`` or ``ORCHMEM_CONFIG``), then
the defaults declared in :mod:`orchmem.config.settings`. Settings are built here, on
request, never at import time.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .environ import EnvironSource, check_unknown_env
from .errors import ConfigError
from .settings import Settings, deep_merge, format_errors


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    environ: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build the settings from a TOML file, ``ORCHMEM_*`` variables and ``overrides``.

    ``config_path`` defaults to ``$ORCHMEM_CONFIG``; without either, only the
    environment and the defaults apply. ``environ`` defaults to ``os.environ``.
    Raises :class:`ConfigError` naming every bad key.
    """
    environ = dict(os.environ if environ is None else environ)
    check_unknown_env(environ)
    path = config_path or environ.get("ORCHMEM_CONFIG") or None
    toml_path = Path(path).expanduser() if path else None
    values = read_toml(toml_path) if toml_path is not None else {}
    values = deep_merge(values, EnvironSource(Settings, environ)())
    values = deep_merge(values, overrides)
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc)) from exc
    settings._config_path = toml_path.resolve() if toml_path is not None else None
    return settings


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
