"""Every yes/no field of a shape that crosses a boundary takes JSON true or false only:
"yes", 1 or "true" would otherwise pass as true (a hard forget asked for by a typo)."""

from __future__ import annotations

import importlib
import pkgutil
import types
from typing import Any, Union, get_args, get_origin

from annotated_types import BaseMetadata
from pydantic.fields import FieldInfo

import orchmem.models
import orchmem.worker
from orchmem.models.core.shapes import WireModel


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    pending = [cls]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return found


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(a is bool for a in get_args(annotation))
    return False


def _strict(info: FieldInfo) -> bool:
    return any(getattr(m, "strict", None) is True for m in info.metadata
               if isinstance(m, BaseMetadata) or hasattr(m, "strict"))


def test_every_boolean_of_a_wire_model_is_strict() -> None:
    for package in (orchmem.models, orchmem.worker):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    loose = [f"{model.__module__}.{model.__name__}.{name}"
             for model in _subclasses(WireModel)
             for name, info in model.model_fields.items()
             if _is_bool(info.annotation) and not _strict(info)]
    assert len(_subclasses(WireModel)) > 20
    assert loose == []
