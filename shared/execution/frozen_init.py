"""``slot_init``: a cheaper ``__init__`` for the frozen dataclasses the worker builds per job.

A frozen dataclass refuses ``__setattr__``, so its generated ``__init__`` writes every field
through ``object.__setattr__`` — about twice what writing the slot costs. The worker builds
several per job (the claimed row, its ``ClaimRef``, the ``Run``, the ``JobExecution``), which
made those constructors a tenth of its time per job. With ``slots=True`` each field is a member
descriptor, and its ``__set__`` writes the slot directly; this decorator swaps in an
``__init__`` doing that. Cheaper still: for an instance of the class itself (not of a
subclass), the ``__init__`` switches it to a plain twin class of the same layout, writes each
field with a plain attribute store, and switches it back; the per-field ``__set__`` calls
remain for subclasses. Same signature and defaults, same instances: still frozen (assignment
still raises), equal, hashable and printable as before.

Only for plain frozen slotted dataclasses: no ``default_factory``, ``InitVar``, ``kw_only`` field
or ``__post_init__`` (it refuses any of those, at import).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def slot_init(cls: type[T]) -> type[T]:
    """Replace ``cls.__init__`` (a frozen, slotted dataclass) with one writing the slots."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"slot_init needs a frozen dataclass with slots=True: {cls.__name__}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"slot_init does not run __post_init__: {cls.__name__}")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = list(inspect.signature(cls.__init__).parameters)[1:]
    if names != [f.name for f in fields]:  # an InitVar, or a field left out of __init__
        raise TypeError(f"slot_init supports plain fields only: {cls.__name__}{tuple(names)}")
    twin = _twin(cls)
    namespace: dict[str, Any] = {"_cls": cls, "_twin": twin, "_set_class": object.__setattr__}
    args: list[str] = []
    body: list[str] = []
    for index, f in enumerate(fields):
        if not f.init or f.default_factory is not _MISSING or f.kw_only is True:
            raise TypeError(f"slot_init supports plain fields only: {cls.__name__}.{f.name}")
        setter = f"_set{index}"
        namespace[setter] = cls.__dict__[f.name].__set__
        if f.default is _MISSING:
            args.append(f.name)
        else:
            namespace[f"_default{index}"] = f.default
            args.append(f"{f.name}=_default{index}")
        body.append(f"    {setter}(self, {f.name})")
    if twin is not None and fields:
        # The instance wears its twin's class while its fields are written: plain attribute
        # stores, which the interpreter specialises to slot writes.
        stores = [f"        self.{f.name} = {f.name}" for f in fields]
        body = [
            "    if type(self) is _cls:",
            "        _set_class(self, '__class__', _twin)",
            *stores,
            "        self.__class__ = _cls",
            "        return",
            *body,
        ]
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _twin(cls: type[Any]) -> type[Any] | None:
    """A plain class with ``cls``'s layout (same bases, same slots), or None when CPython would
    not let an instance switch between the two. Not frozen: its slots are written with plain
    attribute stores, much cheaper than calling each slot's ``__set__``."""
    slots = cls.__dict__["__slots__"]
    bases = cls.__dict__.get("__orig_bases__", cls.__bases__)  # Generic[T] for a generic one
    try:
        twin = types.new_class(
            f"{cls.__name__}Fields",
            bases,
            exec_body=lambda ns: ns.update(__slots__=slots, __module__=cls.__module__),
        )
        probe = object.__new__(cls)
        object.__setattr__(probe, "__class__", twin)
        object.__setattr__(probe, "__class__", cls)
    except TypeError:
        return None
    return twin
