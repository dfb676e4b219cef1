"""Building a model from values already checked (rows read back from our own file).

Pydantic's ``model_construct`` skips validation but still, for every field of the
class, looks the value up under its alias and its validation aliases (every
:class:`~orchmem.models.core.shapes.WireModel` field has a camelCase alias), builds the
list of those aliases, and asks each field for its default: 20-40 µs for a memory
node. Recall builds about 140 models per answer, so ``model_construct`` would cost a
millisecond of every recall (docs/performance.md#threads).

:func:`trusted` gives the same object (the same ``__dict__``, the same fields set,
no extra, no private state) from values given by field name, with the defaults of
the fields left out computed the way ``model_construct`` computes them.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def trusted(cls: type[M], **values: Any) -> M:
    """An instance of ``cls`` from ``values`` (field names, not aliases), unvalidated,
    equal to ``cls.model_construct(**values)``.

    Only for values this process read from storage or built itself: nothing is
    checked. Raises TypeError for a name that is not a field (``model_construct``
    would drop it silently) and for a model that needs what this shortcut skips
    (extra fields, a post-init hook, a root model)."""
    names, known, defaults = _layout(cls)
    if not values.keys() <= known:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(values.keys() - known)}")
    if len(values) == len(names):  # every field given: declaration order, nothing to fill
        fields = {name: values[name] for name in names}
    else:
        fields = _with_defaults(cls, names, defaults, values)
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", fields)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _with_defaults(cls: type[BaseModel], names: tuple[str, ...], defaults: dict[str, Any],
                   values: dict[str, Any]) -> dict[str, Any]:
    """``values`` in declaration order, the fields left out given their defaults."""
    fields: dict[str, Any] = {}
    for name in names:
        if name in values:
            fields[name] = values[name]
        elif name in defaults:
            fields[name] = defaults[name].get_default(call_default_factory=True,
                                                      validated_data=fields)
        else:
            raise TypeError(f"{cls.__name__}: required field {name!r} not given")
    return fields


@cache
def _layout(cls: type[BaseModel]) -> tuple[tuple[str, ...], frozenset[str], dict[str, Any]]:
    """The field names of ``cls`` in declaration order, as a set, and the fields with a
    default."""
    if (cls.model_config.get("extra") == "allow" or cls.__pydantic_post_init__
            or cls.__pydantic_root_model__ or cls.__private_attributes__):
        raise TypeError(f"{cls.__name__} cannot be built by trusted(): use model_construct")
    fields = cls.__pydantic_fields__
    return (tuple(fields), frozenset(fields),
            {n: f for n, f in fields.items() if not f.is_required()})
