"""A serializer's JSON Schemas, field by field (input: writable fields, additionalProperties false;
output: readable fields), each checked against Draft 2020-12 and against real values."""

from __future__ import annotations

import jsonschema
import pytest
from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.pagination import LimitOffsetPagination, PageNumberPagination

from mcp_oauth.mcp_server.drf_tools.schema import (
    input_schema,
    list_output_schema,
    lookup_schema,
    output_schema,
    query_parameters,
    to_json_schema,
)
from project.api import NoteSerializer
from project.models import Note


class Address(serializers.Serializer):
    street = serializers.CharField(max_length=100)
    city = serializers.CharField(required=False, allow_blank=True)


class Item(serializers.Serializer):
    sku = serializers.CharField(validators=[RegexValidator(r"^[A-Z]{3}-\d+\Z")])
    quantity = serializers.IntegerField(min_value=1, max_value=99)


class Order(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    status = serializers.ChoiceField(choices=[("new", "New"), ("paid", "Paid")], help_text="Where the order is.")
    priority = serializers.ChoiceField(choices=[1, 2, 3], required=False)
    note = serializers.CharField(max_length=500, min_length=2, allow_null=True, required=False)
    email = serializers.EmailField()
    amount = serializers.DecimalField(max_digits=6, decimal_places=2, coerce_to_string=False, min_value=0)
    paid = serializers.BooleanField(default=False)
    when = serializers.DateTimeField(required=False)
    tags = serializers.ListField(child=serializers.CharField(), max_length=5, required=False)
    shipping = Address()
    items = Item(many=True)
    secret = serializers.CharField(write_only=True)
    computed = serializers.SerializerMethodField()
    extra = serializers.JSONField(required=False)
    upload = serializers.FileField(required=False)
    hidden = serializers.HiddenField(default="x")

    def get_computed(self, obj) -> int:
        return 1


def test_input_schema_field_by_field():
    schema = input_schema(Order())
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    # read-only fields (id, computed), files and hidden fields are not arguments; write-only ones are
    assert list(props) == [
        "status",
        "priority",
        "note",
        "email",
        "amount",
        "paid",
        "when",
        "tags",
        "shipping",
        "items",
        "secret",
        "extra",
    ]
    assert schema["required"] == ["status", "email", "amount", "shipping", "items", "secret"]
    assert schema["additionalProperties"] is False
    assert props["status"] == {"enum": ["new", "paid"], "type": "string", "description": "Where the order is."}
    assert props["priority"] == {"enum": [1, 2, 3], "type": "integer"}
    assert props["note"] == {"type": ["string", "null"], "maxLength": 500, "minLength": 2}
    assert props["email"] == {"type": "string", "format": "email"}
    assert props["amount"]["type"] == "number" and props["amount"]["minimum"] == 0
    assert props["paid"] == {"type": "boolean", "default": False}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "maxItems": 5}
    assert props["shipping"] == {
        "type": "object",
        "properties": {"street": {"type": "string", "maxLength": 100}, "city": {"type": "string"}},
        "required": ["street"],
        "additionalProperties": False,
    }
    assert props["items"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "pattern": r"^[A-Z]{3}-\d+$"},
                "quantity": {"type": "integer", "maximum": 99, "minimum": 1},
            },
            "required": ["sku", "quantity"],
            "additionalProperties": False,
        },
    }
    assert props["extra"] == {}  # any JSON value


def test_the_input_schema_accepts_and_refuses_what_the_serializer_would():
    validator = jsonschema.Draft202012Validator(input_schema(Order()))
    good = {
        "status": "new",
        "email": "a@example.com",
        "amount": 12.5,
        "shipping": {"street": "Main"},
        "items": [{"sku": "ABC-1", "quantity": 2}],
        "secret": "s",
        "note": None,
    }
    assert list(validator.iter_errors(good)) == []
    for bad in (
        {**good, "status": "shipped"},
        {**good, "priority": 4},
        {**good, "note": "x" * 501},
        {**good, "id": 5},
        {**good, "shipping": {"street": "Main", "planet": "Mars"}},
        {**good, "items": [{"sku": "ABC-1", "quantity": 100}]},
        {key: value for key, value in good.items() if key != "email"},
    ):
        assert list(validator.iter_errors(bad)), bad


def test_a_partial_serializer_requires_nothing():
    schema = input_schema(Order(partial=True))
    assert "required" not in schema
    assert "required" not in schema["properties"]["shipping"]  # nested serializers inherit partial


def test_output_schema_keeps_readable_fields_and_requires_nothing():
    schema = output_schema(Order())
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert "secret" not in props and "required" not in schema and "additionalProperties" not in schema
    assert props["id"] == {"type": "integer"}
    assert props["computed"] == {}  # a method's value: any JSON
    assert props["upload"] == {"type": ["string", "null"], "format": "uri"}
    assert "hidden" not in props


def test_model_serializer_schemas_of_the_reference_site():
    schema = input_schema(NoteSerializer())
    assert schema == {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "A short title (at most 200 characters).", "maxLength": 200},
            "body": {"type": "string", "description": "The note's text."},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    out = output_schema(NoteSerializer())
    assert list(out["properties"]) == ["id", "owner", "title", "body", "created_at", "updated_at"]
    assert out["properties"]["owner"] == {"description": "Who owns the note (set by the server)."}


def test_to_json_schema_rewrites_openapi_spellings():
    assert to_json_schema({"type": "string", "nullable": True, "example": "x", "readOnly": True}) == {
        "type": ["string", "null"]
    }
    assert to_json_schema({"enum": ["a"], "type": "string", "nullable": True}) == {
        "enum": ["a", None],
        "type": ["string", "null"],
    }
    assert to_json_schema({"properties": {"a": {"type": "integer", "nullable": True}}}) == {
        "properties": {"a": {"type": ["integer", "null"]}}
    }


def test_list_output_schema_with_and_without_a_paginator():
    paged = list_output_schema(NoteSerializer(), PageNumberPagination())
    jsonschema.Draft202012Validator.check_schema(paged)
    assert paged["required"] == ["count", "results"]
    assert paged["properties"]["next"] == {"type": ["string", "null"], "format": "uri"}
    assert paged["properties"]["results"]["items"]["properties"]["title"]["maxLength"] == 200
    plain = list_output_schema(NoteSerializer(), None)
    assert plain["required"] == ["results"] and plain["properties"]["results"]["type"] == "array"


def test_query_parameters_of_filters_and_paginator():
    class View:
        ordering_fields = ["title"]

    found = query_parameters(View(), [SearchFilter(), OrderingFilter()], LimitOffsetPagination())
    assert list(found) == ["search", "ordering", "limit", "offset"]
    assert found["limit"] == {"type": "integer", "description": "Number of results to return per page."}
    assert query_parameters(View(), [], None) == {}


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("pk", {"type": "integer", "description": "The pk of the note."}),
        ("title", {"type": "string", "minLength": 1, "description": "The title of the note."}),
        ("nope", {"type": "string", "minLength": 1}),
    ],
)
def test_lookup_schema(field, expected):
    assert lookup_schema(Note, field) == expected


def test_lookup_schema_without_a_model():
    assert lookup_schema(None, "slug") == {"type": "string", "minLength": 1}
