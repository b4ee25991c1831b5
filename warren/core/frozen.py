"""A faster ``__init__`` for the frozen dataclasses made once or more per delivery (``Delivery``, ``SendResult``,
``AttemptRecord``).

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``, one call a field:
for ten to thirteen fields, about as much CPU as parsing the message's JSON. The ``__init__`` made here takes the
same parameters, in the same order, with the same defaults, and writes the instance's ``__dict__`` in one
assignment; nothing else changes (the class stays frozen: assigning a field still raises, and equality, hashing
and ``repr`` are the dataclass's own). A class it cannot do this for (slots, ``__post_init__``, a default
factory, keyword-only or init-only fields) keeps the dataclass's ``__init__``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["quick_init"]

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that writes its fields at once (module docstring)."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    usable = (
        not hasattr(cls, "__slots__")
        and not hasattr(cls, "__post_init__")
        and all(f.init and not f.kw_only and f.default_factory is dataclasses.MISSING for f in fields)
        and len(fields) == len([f for f in cls.__dataclass_fields__.values() if f.init])  # type: ignore[attr-defined]
    )
    if not usable:
        return cls
    defaults: dict[str, Any] = {}
    params = []
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    items = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    source = f"def __init__(self, {', '.join(params)}):\n    _set(self, '__dict__', {{{items}}})\n"
    namespace: dict[str, Any] = {"_set": object.__setattr__, **defaults}
    exec(source, namespace)  # built from the dataclass's own field names, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
