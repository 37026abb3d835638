"""Make Python 3.11's ``typing.TypedDict`` something pydantic can validate.

pydantic refuses ``typing.TypedDict`` before Python 3.12 (it lacks the metadata pydantic reads)
and asks for ``typing_extensions.TypedDict``. Authors write the stdlib one, so rather than
refusing their input declaration we rebuild the class — same name, same keys, same required
and optional split — as a ``typing_extensions`` TypedDict, through lists, unions and Annotated.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Annotated, Any, NotRequired, Required, Union, get_args, get_origin

import typing_extensions

_CONTAINERS = (list, set, frozenset, tuple, dict)


def portable_typeddicts(annotation: Any, _seen: frozenset[int] = frozenset()) -> Any:
    """``annotation`` with every TypedDict in it rebuilt as a typing_extensions one."""
    if typing_extensions.is_typeddict(annotation):  # either kind: one may hold the other
        if id(annotation) in _seen:
            raise TypeError(f"recursive TypedDict {annotation.__name__} is not supported")
        return _rebuild(annotation, _seen | {id(annotation)})
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return Annotated[(portable_typeddicts(args[0], _seen), *annotation.__metadata__)]
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, [portable_typeddicts(a, _seen) for a in args])
    if origin in _CONTAINERS and args:
        return origin[tuple(portable_typeddicts(a, _seen) for a in args)]
    return annotation


def _rebuild(td: Any, seen: frozenset[int]) -> Any:
    hints = typing.get_type_hints(td, include_extras=True)
    fields: dict[str, Any] = {}
    for key, hint in hints.items():
        # A written Required/NotRequired wins: under `from __future__ import annotations` the
        # stdlib computed __required_keys__ from a string and could not see it.
        required = key in td.__required_keys__
        if get_origin(hint) in (Required, NotRequired):
            required = get_origin(hint) is Required
            hint = get_args(hint)[0]
        inner = portable_typeddicts(hint, seen)
        wrap = typing_extensions.Required if required else typing_extensions.NotRequired
        fields[key] = wrap[inner]
    rebuilt = typing_extensions.TypedDict(td.__name__, fields)  # type: ignore[misc]
    rebuilt.__module__ = td.__module__
    rebuilt.__doc__ = td.__doc__
    return rebuilt
