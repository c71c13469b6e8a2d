"""JSON Schemas (Draft 2020-12) of a DRF serializer, for a tool's ``inputSchema`` and ``outputSchema``
(MCP 2025-11-25 "Tools" § Tool: both are JSON Schema objects).

The field mapping is DRF's own (:class:`rest_framework.schemas.openapi.AutoSchema`: types, formats,
``choices`` -> ``enum``, ``help_text`` -> ``description``, ``max_length``/``min_length`` and
``max_value``/``min_value`` -> ``maxLength``/``minLength``/``maximum``/``minimum``, regex
validators -> ``pattern``, nested serializers inline); what differs is the direction:

* **input** (:func:`input_schema`): read-only fields left out, write-only kept; ``required`` as the
  serializer says (none for a partial update); ``additionalProperties: false`` (an argument the
  serializer does not take is refused, naming it);
* **output** (:func:`output_schema`): read-only kept, write-only left out, nothing required that a
  serializer may leave out.

OpenAPI 3.0 spellings become JSON Schema: ``nullable: true`` -> a ``"null"`` type (and ``None`` in an
``enum``); ``example`` and ``readOnly``/``writeOnly`` dropped; the ``format`` ``binary`` (a file
upload, which a JSON argument cannot carry) makes the field unusable as input: such a field is
left out of the input schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.utils.encoding import force_str
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.schemas.openapi import AutoSchema

__all__ = [
    "input_schema",
    "list_output_schema",
    "lookup_schema",
    "output_schema",
    "query_parameters",
    "to_json_schema",
]

#: Fields whose value DRF cannot type (a method, a read-only attribute, the base field): any JSON value.
_UNTYPED = (serializers.SerializerMethodField, serializers.ReadOnlyField, serializers.Field)
_DROPPED = frozenset({"example", "readOnly", "writeOnly", "nullable"})


def to_json_schema(schema: Any) -> Any:
    """An OpenAPI 3.0 schema object as JSON Schema 2020-12 (``nullable``, ``example`` rewritten, recursively)."""
    if isinstance(schema, list):
        return [to_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: to_json_schema(value) for key, value in schema.items() if key not in _DROPPED}
    if schema.get("nullable"):
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
        if "enum" in converted and None not in converted["enum"]:
            converted["enum"] = [*converted["enum"], None]
    return converted


class _DirectedSchema(AutoSchema):
    """DRF's field mapping, with the serializer mapped for one direction (``"input"`` or ``"output"``)."""

    def __init__(self, direction: str) -> None:
        super().__init__()
        self.direction = direction

    def map_field(self, field: Any) -> dict[str, Any]:
        if isinstance(field, serializers.JSONField) or type(field) in _UNTYPED:
            return {}  # any JSON value: DRF's mapping would guess "string" or "object"
        if isinstance(field, serializers.PrimaryKeyRelatedField) and not getattr(field, "pk_field", None):
            queryset = getattr(field, "queryset", None)  # None on a read-only relation: any key
            return lookup_schema(queryset.model, "pk", described=False) if queryset is not None else {}
        schema = super().map_field(field)
        if self.direction == "output" and schema.get("format") == "binary":
            return {"type": ["string", "null"], "format": "uri"}  # a file's URL, None when empty
        return schema

    def map_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        super().map_field_validators(field, schema)
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            # DRF writes Python's \Z as \z; ECMA-262 (JSON Schema's dialect) ends input with $ outside
            # multiline mode. A pattern that still does not compile is left to the view's own validators.
            pattern = pattern.replace("\\z", "$")
            try:
                re.compile(pattern)
            except re.error:
                del schema["pattern"]
            else:
                schema["pattern"] = pattern

    def map_serializer(self, serializer: serializers.BaseSerializer) -> dict[str, Any]:
        required: list[str] = []
        properties: dict[str, Any] = {}
        for field in serializer.fields.values():  # type: ignore[attr-defined]
            if isinstance(field, serializers.HiddenField):
                continue
            if self.direction == "input" and field.read_only or self.direction == "output" and field.write_only:
                continue
            schema = self.map_field(field)
            if self.direction == "input" and schema.get("format") == "binary":
                continue  # a file: no JSON argument carries one
            if field.allow_null:
                schema["nullable"] = True
            if field.default is not empty and field.default is not None and not callable(field.default):
                schema["default"] = field.default
            if field.help_text:
                schema["description"] = force_str(field.help_text)
            self.map_field_validators(field, schema)
            name = self.get_field_name(field)
            properties[name] = schema
            if self.direction == "input" and field.required and not getattr(serializer.root, "partial", False):
                required.append(name)
        result: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            result["required"] = required
        if self.direction == "input":
            result["additionalProperties"] = False
        return result


def input_schema(serializer: serializers.BaseSerializer) -> dict[str, Any]:
    """The arguments ``serializer`` accepts (its writable fields) as a JSON Schema object."""
    return to_json_schema(_DirectedSchema("input").map_serializer(serializer))


def output_schema(serializer: serializers.BaseSerializer) -> dict[str, Any]:
    """What ``serializer.data`` holds (its readable fields) as a JSON Schema object."""
    return to_json_schema(_DirectedSchema("output").map_serializer(serializer))


def list_output_schema(serializer: serializers.BaseSerializer, paginator: Any) -> dict[str, Any]:
    """The ``list`` action's result: the paginator's envelope around the items, or ``{"results": [items]}``
    when the view does not paginate (structured content is an object, MCP 2025-11-25 "Structured Content")."""
    items = {"type": "array", "items": output_schema(serializer)}
    if paginator is not None:
        envelope = paginator.get_paginated_response_schema(items)
        if isinstance(envelope, dict) and envelope.get("type") == "object":
            return to_json_schema(envelope)
    return {"type": "object", "properties": {"results": items}, "required": ["results"]}


def query_parameters(view: Any, backends: Iterable[Any], paginator: Any) -> dict[str, dict[str, Any]]:
    """The query parameters the filter backends and the paginator of ``view`` read: name -> JSON Schema
    (with the parameter's description). A backend that cannot describe itself adds none."""
    found: dict[str, dict[str, Any]] = {}
    sources = [*backends, *([paginator] if paginator is not None else [])]
    for source in sources:
        describe = getattr(source, "get_schema_operation_parameters", None)
        if describe is None:
            continue
        for parameter in describe(view):
            if parameter.get("in", "query") != "query" or not isinstance(parameter.get("name"), str):
                continue
            schema = to_json_schema(dict(parameter.get("schema") or {"type": "string"}))
            if parameter.get("description"):
                schema["description"] = force_str(parameter["description"])
            found[parameter["name"]] = schema
    return found


def lookup_schema(model: Any, lookup_field: str, described: bool = True) -> dict[str, Any]:
    """The JSON Schema of a detail action's lookup value (``model``'s field ``lookup_field``): an
    integer for an integer field, else a non-empty string."""
    if model is not None:
        try:
            field = model._meta.pk if lookup_field == "pk" else model._meta.get_field(lookup_field)
        except FieldDoesNotExist:
            field = None
        about = {"description": f"The {lookup_field} of the {model._meta.verbose_name}."} if described else {}
        if isinstance(field, models.IntegerField):  # AutoField and BigAutoField included
            return {"type": "integer", **about}
        if field is not None:
            return {"type": "string", "minLength": 1, **about}
    return {"type": "string", "minLength": 1}
