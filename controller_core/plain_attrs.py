"""Frozen attrs values built by setting their slots, where that gives what `__init__` gives.

A frozen attrs class's keyword `__init__` sets each field through `object.__setattr__`, about
twice the cost of setting the slots directly. The paths that build many values, a
`ControllerState` per decision (draft.py, isr_change.py) and an UpdateMetadata per broker per
ISR change (isr_change.py), set the slots while `is_plain` says the class still has exactly the
plain fields they expect; a class changed later falls back to its own constructor, so this can
cost speed, never a different value.
"""
from __future__ import annotations

from typing import Callable

import attrs


def is_plain(cls: type, names: tuple[str, ...], converted: frozenset = frozenset()) -> bool:
    """Whether `cls` is a slotted attrs class of exactly the fields `names`, without validators,
    setattr hooks or init hooks, and with a converter only on the fields in `converted`: then
    setting its slots gives what its `__init__` would give (for values each converter keeps as
    they are). Checked at import by the callers."""
    fields = attrs.fields(cls)
    return (tuple(f.name for f in fields) == names
            and set(cls.__dict__.get("__slots__", ("__dict__",))) - {"__weakref__"} == set(names)  # (no cached hash)
            and not hasattr(cls, "__attrs_post_init__") and not hasattr(cls, "__attrs_pre_init__")
            and all(f.validator is None and f.on_setattr is None and (f.converter is None or f.name in converted)
                    for f in fields))


def builder(cls: type, converted: frozenset = frozenset()) -> Callable[..., object]:
    """`build(*values)`: `cls(**dict(zip(its field names, values)))`, every field given in
    declaration order (a field in `converted` given a value its converter keeps as it is), its
    slots set directly while `is_plain` holds."""
    names = tuple(f.name for f in attrs.fields(cls))
    if not is_plain(cls, names, converted):
        return lambda *values: cls(**dict(zip(names, values)))
    sets = tuple(cls.__dict__[name].__set__ for name in names)
    make = object.__new__

    def build(*values):
        value = make(cls)
        for put, v in zip(sets, values):
            put(value, v)
        return value

    return build
