"""Frozen, slotted dataclasses: building instances without their slow ``__init__``, and pickling
them when mypyc compiles them."""

from __future__ import annotations

import dataclasses
from dataclasses import fields
from typing import Any, TypeVar, cast

_T = TypeVar("_T")


def pickled_by_constructor(record: Any) -> tuple[type, tuple[Any, ...]]:
    """A ``__reduce__`` for a frozen dataclass that mypyc compiles: its class and its fields.

    Unpickling such a class cannot set its frozen fields one by one, so it
    is rebuilt through its constructor instead.
    """
    return type(record), tuple(getattr(record, spec.name) for spec in fields(record))


def unfrozen_builder(cls: type[_T]) -> type[_T]:
    """A class whose calls take ``cls``'s arguments and return ``cls`` instances, built faster.

    ``cls`` is a frozen dataclass with slots. Its own ``__init__`` sets each
    field through ``object.__setattr__`` (the frozen class refuses plain
    stores); the builder has the same slots and fields, unfrozen, so its
    ``__init__`` stores them directly, and then gives the instance ``cls``'s
    class (the layouts are the same, so Python allows it). Three to four
    times faster for a record of twenty fields; the simulator makes one per
    job, and a trace reader one `Job` per row.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    specs: list[tuple[str, Any, Any]] = []
    for spec in fields(cast(Any, cls)):
        if not spec.init or spec.kw_only:
            raise TypeError(f"{cls.__name__}.{spec.name}: only positional init fields are supported")
        specs.append((spec.name, spec.type, dataclasses.field(
            default=spec.default, default_factory=spec.default_factory)))
    post_init = getattr(cls, "__post_init__", None)

    def __post_init__(self: Any) -> None:
        if post_init is not None:
            post_init(self)
        self.__class__ = cls

    builder: type[_T] = dataclasses.make_dataclass(
        f"_Unfrozen{cls.__name__}", specs, slots=True, eq=False, repr=False, match_args=False,
        namespace={"__post_init__": __post_init__, "__module__": cls.__module__})
    if builder.__slots__ != cls.__slots__:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} has slots beyond its fields")
    return builder
