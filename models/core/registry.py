"""Pluggable parts: a setting names an implementation, this resolves the name.

A setting such as ``embedding.backend`` or ``memory.writeback.extractor`` holds either
a built-in name ("sentence-transformers", "rules") or a plug-in spec,
``"package.module:attr"``, naming an importable callable. Each interface keeps its own
table of built-in names next to its implementations (``models/embedding/embedders.py``,
``models/writeback/extraction.py``) and resolves the setting here, so both kinds of part are
chosen the same way and fail with the same kind of message.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TypeVar

from orchmem.config import OrchmemError

T = TypeVar("T", bound=Callable[..., object])


def resolve(spec: str, built_in: Mapping[str, T], *, setting: str,
            error: type[OrchmemError]) -> T:
    """The implementation ``spec`` names: a key of ``built_in``, or ``"package.module:attr"``.

    ``setting`` is the dotted key the spec came from, quoted in every message; ``error``
    is the error class the caller's failure is (for the extractor, a rejected write-back;
    for the embedder, vectors that are unavailable). Raises ``error`` for an unknown
    name, a module or attribute that cannot be imported, or an attribute that is not
    callable.
    """
    if spec in built_in:
        return built_in[spec]
    module_name, colon, attr = spec.partition(":")
    if not colon:
        known = ", ".join(repr(name) for name in built_in)
        raise error(f"{setting} {spec!r} is not a built-in name ({known}) nor a "
                    "'package.module:attr' spec")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise error(f"{setting} {spec!r} cannot be imported: {exc}") from exc
    if not callable(found):
        raise error(f"{setting} {spec!r} is not callable")
    return found
