"""Settings written back as TOML, for the files the demo and test roots hand to workers."""

from __future__ import annotations

import json
from typing import Any

from orchmem.config import Settings


def to_toml(settings: Settings, *, exclude_defaults: bool = False) -> str:
    """The settings as TOML text that ``load_settings`` reads back to the same values.

    ``exclude_defaults`` leaves out every value equal to its default. Raises nothing.
    """
    data = settings.model_dump(mode="json", exclude_defaults=exclude_defaults,
                               exclude_none=True)
    return _toml_table(data, "")


def _toml_table(data: dict[str, Any], prefix: str) -> str:
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items()
             if not isinstance(v, dict)]
    out = ([f"[{prefix}]"] if prefix and lines else []) + lines
    for key, value in data.items():
        if isinstance(value, dict):
            name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
            out.append(_toml_table(value, name) if value else f"[{name}]")
    return "\n".join(part for part in out if part) + "\n"


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() \
        else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table (a retention rule in a list)
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    return json.dumps(str(value))
