"""The ``ORCHMEM_*`` environment as a settings source, read from an explicit mapping.

``ORCHMEM_SHARDS=4`` sets ``shards``; ``__`` separates nested keys
(``ORCHMEM_MEMORY__RETRIEVAL__TOP_N=10``); names are case-insensitive; a value for a
table or a list is JSON (``ORCHMEM_ORCHESTRATORS__A__SHARED_PATHS='["/srv/docs"]'``).
Values stay strings otherwise: the settings models convert and check them.

The mapping is passed in (``os.environ`` by default, in :func:`load_settings`) so that
tests and child processes say exactly which environment they mean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from orchmem.config.errors import ConfigError
from orchmem.config.settings import Settings, deep_merge

ENV_PREFIX = "ORCHMEM_"
#: Environment variables with the prefix that are not settings keys.
NON_SETTINGS_ENV = frozenset({"ORCHMEM_CONFIG"})
NESTED_DELIMITER = "__"


class EnvironSource(PydanticBaseSettingsSource):
    """The settings values named by the ``ORCHMEM_*`` variables of ``environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        prefix = ENV_PREFIX.lower()
        self._variables = {
            key.lower().removeprefix(prefix): value for key, value in environ.items()
            if key.lower().startswith(prefix) and key.upper() not in NON_SETTINGS_ENV
        }

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The variable's raw value for a top-level field (None when unset)."""
        return self._variables.get(field_name), field_name, _is_complex(field.annotation)

    def __call__(self) -> dict[str, Any]:
        """Every field the environment sets, nested keys as nested dicts.

        Raises ConfigError for a table or list value that is not JSON.
        """
        values: dict[str, Any] = {}
        for key, raw in sorted(self._variables.items()):
            path = key.split(NESTED_DELIMITER)
            value = _convert(key, raw, self._annotation(path))
            for name in reversed(path):
                value = {name: value}
            values = deep_merge(values, value)
        return values

    def _annotation(self, path: list[str]) -> Any:
        """The type declared at ``path``; None where no setting is declared."""
        annotation: Any = self.settings_cls
        for name in path:
            annotation = _unwrap_optional(annotation)
            if annotation is Any:
                return Any
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                field = annotation.model_fields.get(name)
                if field is None:
                    return None  # an unknown key: validation names it
                annotation = field.annotation
            elif get_origin(annotation) is dict:
                annotation = get_args(annotation)[1]
            else:
                return None
        return annotation


def check_unknown_env(environ: Mapping[str, str]) -> None:
    """Raise ConfigError for an ``ORCHMEM_*`` variable that names no setting."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    for key in environ:
        if not key.startswith(ENV_PREFIX) or key in NON_SETTINGS_ENV:
            continue
        head = key.split(NESTED_DELIMITER, 1)[0]
        if head not in known:
            raise ConfigError(f"invalid settings: {key}: unknown environment variable")


def _unwrap_optional(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, type(int | None)) and len(args) == 1:
        return args[0]
    return annotation


def _is_complex(annotation: Any) -> bool:
    annotation = _unwrap_optional(annotation)
    if get_origin(annotation) in (dict, list):
        return True
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _convert(key: str, raw: str, annotation: Any) -> Any:
    if annotation is Any:
        # An untyped table (per-orchestrator ``memory``): JSON if it parses, so that
        # numbers and booleans keep their type; otherwise the string itself.
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if not _is_complex(annotation):
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"invalid settings: {ENV_PREFIX}{key.upper()}: a table or a list "
                          f"is written as JSON ({exc})") from exc
