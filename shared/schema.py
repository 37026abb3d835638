"""``t``: the input-schema builder, over pydantic, and the one place inputs are validated.

A job's input crosses processes and languages: it is validated at enqueue (so nothing invalid
is ever queued), stored as JSON, parsed again at claim, and described as JSON Schema for the
manifest and for callers in other languages. ``InputSchema`` wraps whichever form the author
chose — ``t.object(...)``, a pydantic model, a dataclass, a TypedDict — behind that one surface.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Generic, Literal, TypeVar

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Strict,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    create_model,
)

from shared.errors import InputInvalidError, InvariantError

T = TypeVar("T")

JSONValue = Any
"""A value orjson can write: dict, list, str, int, float, bool, None (nested)."""


def _canonical_uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError("must be a UUID, e.g. 0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10") from exc


UUIDStr = Annotated[
    str,
    Strict(),
    AfterValidator(_canonical_uuid),
    WithJsonSchema({"type": "string", "format": "uuid"}),
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
        return SchemaType(Annotated[int, Strict()])


class ObjectSchema(SchemaType):
    """``t.object(...)``: a closed object (unknown keys are refused), built as a pydantic model."""

    __slots__ = ("fields", "model")

    def __init__(self, fields: Mapping[str, SchemaType], *, model_name: str = "Input") -> None:
        definitions: dict[str, Any] = {}
        for key, field in fields.items():
            if not isinstance(field, SchemaType):
                raise InvariantError(
                    f"t.object field {key!r} must be a t.* type, got {type(field).__name__}"
                )
            if not key.isidentifier() or key.startswith("_"):
                raise InvariantError(f"t.object field name {key!r} must be a public identifier")
            if field.optional:
                definitions[key] = (field.annotation | None, None)
            else:
                definitions[key] = (field.annotation, ...)
        model = create_model(
            model_name,
            __config__=ConfigDict(extra="forbid", frozen=True),
            **definitions,
        )
        super().__init__(model)
        self.fields = dict(fields)
        self.model: type[BaseModel] = model


class _Builder:
    """The ``t`` namespace: ``t.object(org_id=t.uuid)``, ``t.array(t.string)``, ..."""

    uuid = SchemaType(UUIDStr)
    string = SchemaType(Annotated[str, Strict()])
    number = _NumberType(Annotated[float, Strict(), AfterValidator(lambda v: _finite(v))])
    boolean = SchemaType(Annotated[bool, Strict()])
    any = SchemaType(Any)

    @staticmethod
    def object(**fields: SchemaType) -> ObjectSchema:
        return ObjectSchema(fields)

    @staticmethod
    def array(item: SchemaType) -> SchemaType:
        return SchemaType(list[item.annotation])  # type: ignore[name-defined]

    @staticmethod
    def optional(inner: SchemaType) -> SchemaType:
        return SchemaType(inner.annotation, optional=True)

    @staticmethod
    def literal(*values: str | int | bool) -> SchemaType:
        if not values:
            raise InvariantError("t.literal needs at least one value")
        return SchemaType(Literal[values])

    @staticmethod
    def record(value: SchemaType) -> SchemaType:
        return SchemaType(dict[str, value.annotation])  # type: ignore[name-defined]


def _finite(value: float) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


t = _Builder()

EMPTY_INPUT = ObjectSchema({}, model_name="EmptyInput")


class InputSchema(Generic[T]):
    """The validated surface of a job's input, whatever form the author declared it in."""

    def __init__(self, declared: Any) -> None:
        self.declared = declared
        annotation = declared.annotation if isinstance(declared, SchemaType) else declared
        if annotation is None:
            raise InvariantError("input schema must be a t.* type, a model, a dataclass or a type")
        try:
            self.adapter: TypeAdapter[T] = TypeAdapter(annotation)
            self._json_schema: dict[str, Any] = self.adapter.json_schema()
        except Exception as exc:  # pydantic raises several unrelated classes here
            raise InvariantError(
                f"input schema {declared!r} cannot be validated or described: {exc}"
            ) from exc

    def parse(self, value: Any) -> T:
        """Validate ``value`` (a dict, a model instance, JSON-shaped data); refuse with paths."""
        if isinstance(value, BaseModel) and not isinstance(value, self._model_class()):
            value = value.model_dump(mode="json")
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise input_invalid(exc) from None

    def dump(self, value: T) -> JSONValue:
        """The JSON-shaped form stored on the row and handed to other languages."""
        dumped = self.adapter.dump_python(value, mode="json")
        # Round-trip through orjson once so what is stored is exactly what comes back.
        return orjson.loads(orjson.dumps(dumped))

    def json_schema(self) -> dict[str, Any]:
        return dict(self._json_schema)

    def _model_class(self) -> type:
        declared = self.declared
        if isinstance(declared, ObjectSchema):
            return declared.model
        if isinstance(declared, type):
            return declared
        return object


def input_invalid(exc: ValidationError) -> InputInvalidError:
    """One ``X_INPUT_INVALID`` naming every failing field path (``items.0.id``)."""
    issues = [
        {
            "path": ".".join(str(part) for part in err["loc"]) or "(root)",
            "message": err["msg"],
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
