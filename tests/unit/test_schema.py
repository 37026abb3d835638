"""``t`` and ``InputSchema``: validation with field paths, the JSON round trip, JSON Schema.

The round trip is the contract a queue relies on: what ``parse`` accepted is dumped to JSON,
stored, and parsed again at claim into the same value. The JSON Schema is the contract other
languages rely on: every stored value validates against it.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, NotRequired

import jsonschema  # type: ignore[import-untyped]  # no stubs installed (types-jsonschema)
import pytest
import typing_extensions
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ujobs.errors import InputInvalidError, InvariantError
from ujobs.jobs.schema import MAX_SAFE_INT, InputSchema, SchemaType, as_input_schema, t

ORG = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"


def refused(schema: InputSchema[Any], value: Any) -> InputInvalidError:
    with pytest.raises(InputInvalidError) as info:
        schema.dump(schema.parse(value))
    assert info.value.code == "X_INPUT_INVALID"
    return info.value


def paths(error: InputInvalidError) -> list[str]:
    return [issue["path"] for issue in error.meta["issues"]]


# --- the builders -------------------------------------------------------------------------


def test_uuid_accepts_the_canonical_form_in_any_case_and_stores_it_lower_cased() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(org_id=t.uuid))
    assert schema.parse({"org_id": ORG.upper()}).org_id == ORG
    assert schema.dump(schema.parse({"org_id": ORG})) == {"org_id": ORG}


@pytest.mark.parametrize(
    "value",
    [
        "not-a-uuid",
        ORG.replace("-", ""),  # hex only: one spelling, so keys derived from it dedupe
        "{" + ORG + "}",
        "urn:uuid:" + ORG,
        ORG + "0",
        123,
    ],
)
def test_uuid_refuses_anything_but_the_canonical_form(value: Any) -> None:
    error = refused(InputSchema(t.object(org_id=t.uuid)), {"org_id": value})
    assert paths(error) == ["org_id"]


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        (t.string, "x", 1),
        (t.number, 1.5, "1.5"),
        (t.number, 2, True),
        (t.number, -0.25, math.nan),
        (t.number, 0, math.inf),
        (t.number.int(), 3, 3.5),
        (t.number.int(), -MAX_SAFE_INT, True),
        (t.number.int(), MAX_SAFE_INT, MAX_SAFE_INT + 1),
        (t.boolean, False, 0),
        (t.literal("a", 2), 2, "b"),
        (t.array(t.string), ["x"], "x"),
        (t.record(t.number.int()), {"a": 1}, {"a": "1"}),
    ],
)
def test_each_type_accepts_its_values_and_refuses_others_strictly(
    field: SchemaType, good: Any, bad: Any
) -> None:
    schema: InputSchema[Any] = InputSchema(t.object(v=field))
    assert schema.dump(schema.parse({"v": good})) == {"v": good}
    assert paths(refused(schema, {"v": bad}))[0].startswith("v")


def test_optional_may_be_omitted_or_null_and_a_required_field_may_not() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(a=t.string, b=t.optional(t.string)))
    assert schema.parse({"a": "x"}).b is None
    assert schema.parse({"a": "x", "b": None}).b is None
    assert schema.parse({"a": "x", "b": "y"}).b == "y"
    assert paths(refused(schema, {"b": "y"})) == ["a"]


def test_optional_keeps_its_meaning_outside_an_object() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(xs=t.array(t.optional(t.number.int()))))
    assert schema.parse({"xs": [1, None, 3]}).xs == [1, None, 3]


def test_the_object_is_closed_unknown_keys_are_refused_by_path() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(a=t.string))
    error = refused(schema, {"a": "x", "extra": 1})
    assert paths(error) == ["extra"]
    assert "unknown field" in error.message


def test_a_nested_failure_names_the_full_path_and_every_issue_is_listed() -> None:
    schema: InputSchema[Any] = InputSchema(
        t.object(org_id=t.uuid, items=t.array(t.object(id=t.string)))
    )
    error = refused(schema, {"org_id": "nope", "items": [{"id": "a"}, {"id": 7}]})
    assert sorted(paths(error)) == ["items.1.id", "org_id"]
    assert "(and 1 more)" in error.message
    error = refused(schema, {"org_id": ORG, "items": [{"name": "x"}]})
    assert "items.0.id" in paths(error)
    assert error.message.startswith("input invalid at items.0.")


def test_field_names_a_pydantic_model_reserves_are_ordinary_fields() -> None:
    schema: InputSchema[Any] = InputSchema(
        t.object(json=t.string, schema=t.string, copy=t.string, model_id=t.uuid)
    )
    value = schema.parse({"json": "j", "schema": "s", "copy": "c", "model_id": ORG})
    assert (value.json, value.schema, value.copy, value.model_id) == ("j", "s", "c", ORG)


@pytest.mark.parametrize(
    "build",
    [
        lambda: t.object(a=str),  # type: ignore[arg-type]  # deliberately malformed
        lambda: t.object(_private=t.string),
        lambda: t.object(**{"class": t.string}),
        lambda: t.object(**{"not an identifier": t.string}),
        lambda: t.array(int),  # type: ignore[arg-type]  # deliberately malformed
        lambda: t.optional("x"),  # type: ignore[arg-type]  # deliberately malformed
        lambda: t.literal(),
        lambda: t.literal(1.5),  # type: ignore[arg-type]  # deliberately malformed
        lambda: t.record(None),  # type: ignore[arg-type]  # deliberately malformed
    ],
)
def test_a_malformed_schema_is_refused_where_it_is_built(build: Any) -> None:
    with pytest.raises(InvariantError):
        build()


@pytest.mark.parametrize("value", ["nul\x00byte", "lone \ud800 surrogate"])
def test_strings_no_json_store_can_hold_are_refused_as_input(value: str) -> None:
    assert paths(refused(InputSchema(t.object(s=t.string)), {"s": value})) in (["s"], ["(root)"])


def test_an_integer_past_64_bits_in_a_free_field_is_input_invalid_not_a_crash() -> None:
    assert paths(refused(InputSchema(t.object(x=t.any)), {"x": {"k": [2**70]}})) == ["x.k.0"]


def test_unstorable_values_deep_in_a_free_field_are_refused_at_their_path() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(x=t.any))
    nul = refused(schema, {"x": {"a": ["ok", {"b": "n\x00"}]}})
    assert paths(nul) == ["x.a.1.b"]
    assert nul.message == (
        "input invalid at x.a.1.b: contains a NUL character, which cannot be stored"
    )
    assert paths(refused(schema, {"x": {"k\x00": 1}})) == ["x.k\x00"]
    assert paths(refused(schema, {"x": [-(2**63) - 1]})) == ["x.0"]
    assert paths(refused(schema, {"x": {"s": "\ud800"}})) == ["(root)"]
    # The first problem in order is the one named, whichever kind the encoder met first.
    assert paths(refused(schema, {"x": ["\x00", "\ud800"]})) == ["x.0"]
    assert paths(refused(schema, {"x": ["\ud800", 2**64]})) == ["x.1"]


def test_storable_edges_and_the_text_of_an_escape_are_stored_as_given() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(x=t.any))
    value = {"x": {"u": 2**64 - 1, "i": -(2**63), "escape": "\\u0000", "k\\u0000": True}}
    assert schema.dump(schema.parse(value)) == value


def test_none_declares_the_empty_object() -> None:
    schema = as_input_schema(None)
    assert schema.dump(schema.parse({})) == {}
    assert paths(refused(schema, {"x": 1})) == ["x"]
    assert schema.json_schema()["additionalProperties"] is False


# --- the round trip, for generated schemas --------------------------------------------------

safe_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
)
json_scalars = st.none() | st.booleans() | st.integers(-(2**62), 2**62) | safe_text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(safe_text, inner, max_size=3),
    max_leaves=6,
)

Field = tuple[SchemaType, st.SearchStrategy[Any]]

LEAVES: list[Field] = [
    (t.string, safe_text),
    (t.number, st.floats(allow_nan=False, allow_infinity=False) | st.integers(-1000, 1000)),
    (t.number.int(), st.integers(-MAX_SAFE_INT, MAX_SAFE_INT)),
    (t.boolean, st.booleans()),
    (t.uuid, st.uuids().map(str)),
    (t.literal("a", "b", 3, True), st.sampled_from(["a", "b", 3, True])),
    (t.any, json_values),
]

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: not __import__("keyword").iskeyword(n)
)


@st.composite
def objects(draw: st.DrawFn, inner: st.SearchStrategy[Field]) -> Field:
    fields = draw(st.dictionaries(names, inner, max_size=4))
    schema = t.object(**{k: f for k, (f, _) in fields.items()})
    required = {k: v for k, (f, v) in fields.items() if not f.optional}
    optional = {k: v for k, (f, v) in fields.items() if f.optional}
    return schema, st.fixed_dictionaries(required, optional=optional)


def extend(inner: st.SearchStrategy[Field]) -> st.SearchStrategy[Field]:
    return (
        inner.map(lambda fv: (t.array(fv[0]), st.lists(fv[1], max_size=3)))
        | inner.map(lambda fv: (t.optional(fv[0]), st.none() | fv[1]))
        | inner.map(lambda fv: (t.record(fv[0]), st.dictionaries(safe_text, fv[1], max_size=2)))
        | objects(inner)
    )


fields_strategy = st.recursive(st.sampled_from(LEAVES), extend, max_leaves=8)


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[InputSchema[Any], Any]:
    declared, values = draw(objects(fields_strategy))
    return InputSchema(declared), draw(values)


# Each example builds a schema (a dataclass per object and a pydantic adapter): keep it modest.
@settings(max_examples=60)
@given(schema_and_value())
def test_parse_dump_parse_is_the_identity_and_the_json_schema_accepts_what_is_stored(
    pair: tuple[InputSchema[Any], Any],
) -> None:
    schema, raw = pair
    parsed = schema.parse(raw)
    stored = schema.dump(parsed)
    assert schema.parse(stored) == parsed
    assert schema.dump(schema.parse(stored)) == stored
    described = schema.json_schema()
    assert "$ref" not in repr(described)  # self-contained for callers in other languages
    jsonschema.validate(stored, described, cls=jsonschema.Draft202012Validator)


@settings(max_examples=30)
@given(schema_and_value(), names)
def test_an_unknown_top_level_key_is_refused_by_validation_and_by_the_json_schema(
    pair: tuple[InputSchema[Any], Any], extra: str
) -> None:
    schema, raw = pair
    if extra in raw or extra in schema.json_schema()["properties"]:
        return
    bad = {**raw, extra: 1}
    assert paths(refused(schema, bad)) == [extra]
    assert not jsonschema.Draft202012Validator(schema.json_schema()).is_valid(bad)


# --- every input form ----------------------------------------------------------------------


class LineModel(BaseModel):
    id: str
    qty: int


class OrderModel(BaseModel):
    org_id: str
    lines: list[LineModel]
    note: str | None = None


@dataclasses.dataclass
class LineData:
    id: str
    qty: int


@dataclasses.dataclass
class OrderData:
    org_id: str
    lines: list[LineData]
    note: str | None = None


class LineTD(typing.TypedDict):  # the stdlib one: pydantic refuses it on 3.11 unless rebuilt
    id: str
    qty: int


class OrderTD(typing.TypedDict):
    org_id: str
    lines: list[LineTD]
    note: NotRequired[str]


class OrderTDX(typing_extensions.TypedDict):
    org_id: str
    lines: list[LineTD]
    note: typing_extensions.NotRequired[str]


ORDER_FORMS = [
    t.object(
        org_id=t.string,
        lines=t.array(t.object(id=t.string, qty=t.number.int())),
        note=t.optional(t.string),
    ),
    OrderModel,
    OrderData,
    OrderTD,
    OrderTDX,
]


@pytest.mark.parametrize("declared", ORDER_FORMS, ids=lambda d: getattr(d, "__name__", "t"))
def test_every_input_form_validates_round_trips_and_has_a_json_schema(declared: Any) -> None:
    schema: InputSchema[Any] = InputSchema(declared)
    raw = {"org_id": "o1", "lines": [{"id": "a", "qty": 2}], "note": "n"}
    stored = schema.dump(schema.parse(raw))
    assert stored == raw
    assert schema.parse(stored) == schema.parse(raw)

    described = schema.json_schema()
    assert described["type"] == "object"
    assert set(described["required"]) == {"org_id", "lines"}
    assert described["properties"]["lines"]["items"]["properties"]["qty"]["type"] == "integer"
    jsonschema.validate(stored, described, cls=jsonschema.Draft202012Validator)

    error = refused(schema, {"org_id": "o1", "lines": [{"id": "a"}]})
    assert paths(error) == ["lines.0.qty"]


def test_the_json_schema_handed_out_is_a_copy() -> None:
    schema: InputSchema[Any] = InputSchema(t.object(a=t.string))
    schema.json_schema()["properties"].clear()
    assert "a" in schema.json_schema()["properties"]


def test_a_recursive_model_keeps_its_definitions() -> None:
    class Node(BaseModel):
        value: int
        children: list[Node] = []

    Node.model_rebuild()
    schema: InputSchema[Any] = InputSchema(Node)
    described = schema.json_schema()
    assert "$defs" in described
    jsonschema.validate(
        schema.dump(schema.parse({"value": 1, "children": [{"value": 2}]})),
        described,
        cls=jsonschema.Draft202012Validator,
    )


def test_a_declaration_pydantic_cannot_describe_is_refused_when_declared() -> None:
    class Opaque:
        pass

    with pytest.raises(InvariantError) as info:
        InputSchema(Opaque)
    assert "t.object" in info.value.message
