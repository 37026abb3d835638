"""``t``: the input-schema builder, over pydantic, and the one place inputs are validated.

A job's input crosses processes and languages: it is validated at enqueue (so nothing invalid
is ever queued), stored as JSON, parsed again at claim, and described as JSON Schema for the
manifest and for callers in other languages. ``InputSchema`` wraps whichever form the author
chose — ``t.object(...)``, a pydantic model, a dataclass, a TypedDict — behind that one surface.
"""

from __future__ import annotations

import copy
import dataclasses
import keyword
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Generic, Literal, TypeVar

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    Strict,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)

from ujobs.errors import InputInvalidError, InvariantError
from ujobs.jobs.typeddicts import portable_typeddicts

T = TypeVar("T")

JSONValue = Any
"""A value orjson can write: dict, list, str, int, float, bool, None (nested)."""

MAX_SAFE_INT = 2**53 - 1

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _canonical_uuid(value: str) -> str:
    """The 8-4-4-4-12 form only, lower-cased: the one spelling every language agrees on, so a
    key derived from it dedupes however the caller cased it."""
    if not _UUID.match(value):
        raise ValueError("must be a UUID, e.g. 0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10")
    return value.lower()


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


UUIDStr = Annotated[
    str,
    Strict(),
    AfterValidator(_canonical_uuid),
    WithJsonSchema(
        {"type": "string", "format": "uuid", "pattern": _UUID.pattern.replace("a-fA-F", "a-f")}
    ),
]


class SchemaType:
    """One field's type: a Python annotation pydantic validates, plus whether it may be omitted."""

    __slots__ = ("annotation", "optional")

    def __init__(self, annotation: Any, *, optional: bool = False) -> None:
        self.annotation = annotation
        self.optional = optional

    def __repr__(self) -> str:
        return f"SchemaType({self.annotation!r}, optional={self.optional})"


class _NumberType(SchemaType):
    """``t.number`` is any finite number; ``t.number.int()`` is a whole one."""

    def int(self) -> SchemaType:
        """A whole number every JSON reader holds exactly (JavaScript's safe integers)."""
        return SchemaType(Annotated[int, Strict(), Field(ge=-MAX_SAFE_INT, le=MAX_SAFE_INT)])


def _field_type(value: Any, where: str) -> SchemaType:
    if not isinstance(value, SchemaType):
        raise InvariantError(
            f"{where} must be a t.* type (t.string, t.object(...), ...), got {value!r}"
        )
    return value


class ObjectSchema(SchemaType):
    """``t.object(...)``: a closed object (unknown keys are refused), built as a frozen dataclass.

    A dataclass rather than a pydantic model, so a field may be called ``json``, ``schema``,
    ``copy`` or ``model_id`` — names a model reserves — and the body still reads
    ``run.input.schema``. pydantic validates it all the same (``extra="forbid"``).
    """

    __slots__ = ("fields", "model")

    def __init__(self, fields: Mapping[str, SchemaType], *, model_name: str = "Input") -> None:
        definitions: list[tuple[str, Any, Any]] = []
        for key, field in fields.items():
            _field_type(field, f"t.object field {key!r}")
            if not key.isidentifier() or key.startswith("_") or keyword.iskeyword(key):
                raise InvariantError(
                    f"t.object field name {key!r} must be a public identifier that is not a "
                    "Python keyword (write from_, class_, ...)"
                )
            default = dataclasses.field(default=None) if field.optional else dataclasses.field()
            definitions.append((key, field.annotation, default))
        model = dataclasses.make_dataclass(
            model_name,
            definitions,
            frozen=True,
            kw_only=True,
            namespace={"__pydantic_config__": ConfigDict(extra="forbid")},
        )
        super().__init__(model)
        self.fields = dict(fields)
        self.model: type[Any] = model


class _Builder:
    """The ``t`` namespace: ``t.object(org_id=t.uuid)``, ``t.array(t.string)``, ..."""

    uuid = SchemaType(UUIDStr)
    string = SchemaType(Annotated[str, Strict()])
    number = _NumberType(Annotated[float, Strict(), AfterValidator(_finite)])
    boolean = SchemaType(Annotated[bool, Strict()])
    any = SchemaType(Any)

    @staticmethod
    def object(**fields: SchemaType) -> ObjectSchema:
        return ObjectSchema(fields)

    @staticmethod
    def array(item: SchemaType) -> SchemaType:
        return SchemaType(list[_field_type(item, "t.array item").annotation])  # type: ignore[misc]

    @staticmethod
    def optional(inner: SchemaType) -> SchemaType:
        """May be omitted or null — inside ``t.object`` and anywhere else (``t.array`` items)."""
        return SchemaType(_field_type(inner, "t.optional").annotation | None, optional=True)

    @staticmethod
    def literal(*values: str | int | bool) -> SchemaType:
        if not values:
            raise InvariantError("t.literal needs at least one value")
        for value in values:
            if not isinstance(value, str | int | bool):
                raise InvariantError(f"t.literal values are strings, ints or bools; got {value!r}")
        return SchemaType(Literal[values])

    @staticmethod
    def record(value: SchemaType) -> SchemaType:
        return SchemaType(dict[str, _field_type(value, "t.record value").annotation])  # type: ignore[misc]


t = _Builder()

EMPTY_INPUT = ObjectSchema({}, model_name="EmptyInput")


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return TypeAdapter(annotation)
    except PydanticUserError as exc:
        # Python 3.11's typing.TypedDict lacks what pydantic reads; rebuild it portably.
        if exc.code != "typed-dict-version":
            raise
        return TypeAdapter(portable_typeddicts(annotation))


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every ``$ref`` into ``$defs`` replaced by its definition.

    A caller in another language reads one self-contained object instead of chasing
    pydantic's generated names (``shared__schema__Input__2``). A recursive model cannot be
    inlined; its schema is answered as pydantic wrote it.
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    if not defs:
        return schema

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in stack:
                raise RecursionError(name)
            siblings = {k: resolve(v, stack) for k, v in node.items() if k != "$ref"}
            return {**resolve(copy.deepcopy(defs[name]), (*stack, name)), **siblings}
        return {k: resolve(v, stack) for k, v in node.items() if k != "$defs"}

    try:
        inlined: dict[str, Any] = resolve(schema, ())
    except RecursionError:
        return schema
    return inlined


class InputSchema(Generic[T]):
    """The validated surface of a job's input, whatever form the author declared it in."""

    def __init__(self, declared: Any) -> None:
        self.declared = declared
        annotation = declared.annotation if isinstance(declared, SchemaType) else declared
        if annotation is None:
            raise InvariantError("input schema must be a t.* type, a model, a dataclass or a type")
        try:
            self.adapter: TypeAdapter[T] = _adapter(annotation)
            self._json_schema: dict[str, Any] = inline_refs(self.adapter.json_schema())
        except Exception as exc:  # pydantic raises several unrelated classes here
            raise InvariantError(
                f"input schema {declared!r} cannot be validated or described ({exc}); use "
                "t.object(...), a pydantic model, a dataclass or a TypedDict"
            ) from exc

    def parse(self, value: Any) -> T:
        """Validate ``value`` (a dict, a model instance, JSON-shaped data); refuse with paths."""
        if isinstance(value, BaseModel) and not isinstance(value, self._model_class()):
            value = value.model_dump(mode="json")
        try:
            # The adapter's validator itself: TypeAdapter.validate_python only forwards to it,
            # after argument checks every enqueue would pay for.
            validated: T = self.adapter.validator.validate_python(value)
            return validated
        except ValidationError as exc:
            raise input_invalid(exc) from None

    def dump(self, value: T) -> JSONValue:
        """The JSON-shaped form stored on the row and handed to other languages.

        ``dump_encoded``'s value, which refuses what cannot be stored."""
        return self.dump_encoded(value)[0]

    def dump_encoded(self, value: T) -> tuple[JSONValue, bytes]:
        """``dump``'s value and its JSON text as orjson writes it (the bytes a driver that
        writes JSON text would write for that value: a batch's COPY takes them as they are).

        Refused with ``X_INPUT_INVALID`` (not a driver's error after the fact) when the value
        cannot be stored as JSON every backend accepts: an integer past 64 bits, a lone
        surrogate, a NUL character (Postgres ``jsonb`` cannot hold ``\\u0000``).
        """
        try:
            dumped = self.adapter.serializer.to_python(value, mode="json")  # dump_python forwards
        except ValueError as exc:
            # pydantic's serializer stops near 255 levels of nesting (and on a cycle) with a
            # ValueError of its own: the value, not the api, is at fault.
            raise InputInvalidError(
                f"input cannot be stored as JSON: {exc}",
                meta={"issues": [{"path": "(root)", "message": str(exc), "type": "json"}]},
            ) from None
        # Encode once; walk the value for the failing path only when the encoding says there
        # is one. orjson itself refuses the integers past 64 bits and the lone surrogates, and
        # writes a NUL as the escape ``\\u0000`` (never raw), so a value whose bytes hold
        # neither an error nor that escape has nothing the walk could refuse.
        try:
            encoded = orjson.dumps(dumped)
        except orjson.JSONEncodeError as exc:
            _refuse_unstorable(dumped, ())  # raises with the path when it can name one
            raise InputInvalidError(
                f"input cannot be stored as JSON: {exc}",
                meta={"issues": [{"path": "(root)", "message": str(exc), "type": "json"}]},
            ) from None
        if b"\\u0000" in encoded:
            _refuse_unstorable(dumped, ())  # a NUL, or only the text "\\u0000" (then stored)
        # What is stored is exactly what comes back without decoding ``encoded`` again: the
        # serializer's JSON mode answers plain dicts, lists, str, int, float, bool and None
        # (new containers, keys as text, NaN and infinities as None), each of which orjson
        # writes and reads back equal (tests/unit/test_request_rows.py).
        return dumped, encoded

    def json_schema(self) -> dict[str, Any]:
        return copy.deepcopy(self._json_schema)

    def _model_class(self) -> type:
        declared = self.declared
        if isinstance(declared, ObjectSchema):
            return declared.model
        if isinstance(declared, type):
            return declared
        return object


def _refuse_unstorable(value: Any, path: tuple[str | int, ...]) -> None:
    problem = None
    if isinstance(value, str):
        if "\x00" in value:
            problem = "contains a NUL character, which cannot be stored"
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            problem = "is an integer past 64 bits, which JSON storage cannot hold"
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstorable(key, (*path, str(key)))
            _refuse_unstorable(item, (*path, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _refuse_unstorable(item, (*path, index))
    if problem is not None:
        where = ".".join(str(part) for part in path) or "(root)"
        raise InputInvalidError(
            f"input invalid at {where}: {problem}",
            meta={"issues": [{"path": where, "message": problem, "type": "unstorable"}]},
        )


_MESSAGES = {
    "unexpected_keyword_argument": "unknown field: the input accepts only its declared fields",
    "extra_forbidden": "unknown field: the input accepts only its declared fields",
}


def input_invalid(exc: ValidationError) -> InputInvalidError:
    """One ``X_INPUT_INVALID`` naming every failing field path (``items.0.id``)."""
    issues = [
        {
            "path": ".".join(str(part) for part in err["loc"]) or "(root)",
            "message": _MESSAGES.get(err["type"], err["msg"]),
            "type": err["type"],
        }
        for err in exc.errors()
    ]
    first = issues[0] if issues else {"path": "(root)", "message": "invalid"}
    more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
    return InputInvalidError(
        f"input invalid at {first['path']}: {first['message']}{more}",
        meta={"issues": issues},
    )


def as_input_schema(declared: Any) -> InputSchema[Any]:
    """``InputSchema`` from any accepted declaration; None is the empty object."""
    if isinstance(declared, InputSchema):
        return declared
    return InputSchema(EMPTY_INPUT if declared is None else declared)
