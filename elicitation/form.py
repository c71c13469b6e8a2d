"""Form-mode ``requestedSchema``: the restricted JSON Schema and validation of answers.

MCP 2025-11-25 "Elicitation" / "Requested Schema" (with SEP-1034 defaults and
SEP-1330 enums): a form is a *flat* object whose properties are primitives, so a
client can render it without a JSON Schema engine:

* ``string``: ``minLength``, ``maxLength``, ``format`` (``email``, ``uri``,
  ``date``, ``date-time``), ``default``;
* ``number`` / ``integer``: ``minimum``, ``maximum``, ``default``;
* ``boolean``: ``default``;
* single-select enum: ``{"type": "string", "enum": [...]}`` (optionally the legacy
  ``enumNames`` of the same length) or ``{"type": "string", "oneOf": [{"const", "title"}, ...]}``;
* multi-select enum: ``{"type": "array", "items": {"type": "string", "enum": [...]}}`` or
  ``{"type": "array", "items": {"anyOf": [{"const", "title"}, ...]}}``, with ``minItems``,
  ``maxItems``, ``default`` (a list of the values);
* every property may have ``title`` and ``description``; the object has ``properties``,
  ``required`` (names of properties), ``title``, ``description``, ``$schema``.

Anything else (nesting, ``$ref``, other keywords) is refused by
:func:`validate_requested_schema` with :class:`InvalidElicitationSchema` naming the
property. Answers are checked by :func:`validate_content` with ``jsonschema``
(Draft 2020-12, formats asserted), raising :class:`InvalidElicitationContent`.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import jsonschema

from mcp_oauth.mcp_server.tools import ToolError
from mcp_oauth.shared.text import storable

__all__ = [
    "STRING_FORMATS",
    "ElicitationSchema",
    "InvalidElicitationContent",
    "InvalidElicitationSchema",
    "validate_content",
    "validate_requested_schema",
]

#: The ``format`` values a form string may carry (MCP 2025-11-25 "Requested Schema").
STRING_FORMATS: frozenset[str] = frozenset({"email", "uri", "date", "date-time"})

_ROOT_KEYS = frozenset({"$schema", "type", "properties", "required", "title", "description"})
_COMMON_KEYS = frozenset({"type", "title", "description", "default"})
_KEYS_BY_TYPE = {
    "string": _COMMON_KEYS | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON_KEYS | {"minimum", "maximum"},
    "integer": _COMMON_KEYS | {"minimum", "maximum"},
    "boolean": _COMMON_KEYS,
    "array": _COMMON_KEYS | {"items", "minItems", "maxItems"},
}
_MAX_ERRORS = 10


class InvalidElicitationSchema(ValueError):
    """A ``requestedSchema`` outside the form-mode restriction (a programming error of the tool)."""


class InvalidElicitationContent(ToolError, ValueError):
    """An accepted answer that does not match the form's schema.

    ``errors`` is a list of ``{"field": name, "message": text}`` (``field`` is ``""`` for
    the answer as a whole); ``str()`` is one line naming every bad field. As a
    :class:`~mcp_oauth.mcp_server.tools.ToolError` it fails the tool call with that line.
    """

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        parts = [f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors]
        super().__init__("The answer does not match the form: " + "; ".join(parts))


# -- requestedSchema restriction -------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _options(name: str, where: str, items: Any) -> list[str]:
    """The ``const`` values of a ``oneOf`` / ``anyOf`` list of ``{"const": str, "title": str}``."""
    if not isinstance(items, list) or not items:
        raise InvalidElicitationSchema(f"property {name!r}: {where} must be a non-empty list of {{const, title}}")
    values = []
    for option in items:
        if (
            not isinstance(option, dict)
            or set(option) - {"const", "title"}
            or not isinstance(option.get("const"), str)
            or not isinstance(option.get("title", ""), str)
        ):
            raise InvalidElicitationSchema(
                f'property {name!r}: each {where} option must be {{"const": string, "title": string}}'
            )
        values.append(option["const"])
    if len(set(values)) != len(values):
        raise InvalidElicitationSchema(f"property {name!r}: {where} has duplicate values")
    return values


def _enum(name: str, values: Any) -> list[str]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise InvalidElicitationSchema(f"property {name!r}: enum must be a non-empty list of strings")
    if len(set(values)) != len(values):
        raise InvalidElicitationSchema(f"property {name!r}: enum has duplicate values")
    return values


def _non_negative(name: str, prop: Mapping[str, Any], low: str, high: str) -> None:
    for key in (low, high):
        if key in prop and (not _is_int(prop[key]) or prop[key] < 0):
            raise InvalidElicitationSchema(f"property {name!r}: {key} must be a non-negative integer")
    if low in prop and high in prop and prop[low] > prop[high]:
        raise InvalidElicitationSchema(f"property {name!r}: {low} is greater than {high}")


def _check_property(name: str, prop: Any) -> None:
    if not isinstance(prop, dict):
        raise InvalidElicitationSchema(f"property {name!r}: must be a schema object")
    kind = prop.get("type")
    if not isinstance(kind, str) or kind not in _KEYS_BY_TYPE:
        raise InvalidElicitationSchema(
            f"property {name!r}: type must be one of string, number, integer, boolean, array (got {kind!r}); "
            "forms are flat and hold primitives only"
        )
    extra = sorted(set(prop) - _KEYS_BY_TYPE[kind])
    if extra:
        raise InvalidElicitationSchema(f"property {name!r}: keyword {extra[0]!r} is not allowed for type {kind!r}")
    for key in ("title", "description"):
        if key in prop and not isinstance(prop[key], str):
            raise InvalidElicitationSchema(f"property {name!r}: {key} must be a string")

    if kind == "string":
        _non_negative(name, prop, "minLength", "maxLength")
        if "format" in prop and (not isinstance(prop["format"], str) or prop["format"] not in STRING_FORMATS):
            raise InvalidElicitationSchema(
                f"property {name!r}: format must be one of {', '.join(sorted(STRING_FORMATS))}"
            )
        if "enum" in prop and "oneOf" in prop:
            raise InvalidElicitationSchema(f"property {name!r}: use enum or oneOf, not both")
        if "enumNames" in prop and "enum" not in prop:
            raise InvalidElicitationSchema(f"property {name!r}: enumNames needs enum")
        if "enum" in prop or "oneOf" in prop:
            if set(prop) & {"format", "minLength", "maxLength"}:
                raise InvalidElicitationSchema(f"property {name!r}: an enum takes no format or length limits")
            if "enum" in prop:
                values = _enum(name, prop["enum"])
                names = prop.get("enumNames")
                if names is not None and (
                    not isinstance(names, list)
                    or len(names) != len(values)
                    or not all(isinstance(n, str) for n in names)
                ):
                    raise InvalidElicitationSchema(f"property {name!r}: enumNames must be strings, one per enum value")
            else:
                _options(name, "oneOf", prop["oneOf"])
    elif kind in ("number", "integer"):
        for key in ("minimum", "maximum"):
            if key in prop and not (_is_int(prop[key]) if kind == "integer" else _is_number(prop[key])):
                raise InvalidElicitationSchema(f"property {name!r}: {key} must be a {kind}")
        if "minimum" in prop and "maximum" in prop and prop["minimum"] > prop["maximum"]:
            raise InvalidElicitationSchema(f"property {name!r}: minimum is greater than maximum")
    elif kind == "array":
        _non_negative(name, prop, "minItems", "maxItems")
        items = prop.get("items")
        if not isinstance(items, dict):
            raise InvalidElicitationSchema(
                f"property {name!r}: a multi-select needs items {{type: string, enum}} or {{anyOf: [{{const, title}}]}}"
            )
        if "enum" in items and set(items) <= {"type", "enum"} and items.get("type") == "string":
            _enum(name, items["enum"])
        elif "anyOf" in items and set(items) <= {"type", "anyOf"} and items.get("type", "string") == "string":
            _options(name, "items.anyOf", items["anyOf"])
        else:
            raise InvalidElicitationSchema(
                f"property {name!r}: items must be {{type: string, enum: [...]}} or {{anyOf: [{{const, title}}]}}"
            )

    if "default" in prop:
        errors = list(_validator({"type": "object", "properties": {name: prop}}).iter_errors({name: prop["default"]}))
        if errors:
            raise InvalidElicitationSchema(f"property {name!r}: default does not match: {_short(errors[0].message)}")


def validate_requested_schema(schema: Any) -> dict[str, Any]:
    """Check ``schema`` against the form-mode restriction; return a deep copy of it.

    :param schema: ``{"type": "object", "properties": {name: primitive schema}, "required": [...]}``
        (see the module docstring for the primitives).
    :raises InvalidElicitationSchema: with a message naming the offending property or keyword.
    """
    if not isinstance(schema, Mapping):
        raise InvalidElicitationSchema("requestedSchema must be a JSON object (dict)")
    schema = copy.deepcopy(dict(schema))
    if schema.get("type") != "object":
        raise InvalidElicitationSchema('requestedSchema must have "type": "object"')
    extra = sorted(set(schema) - _ROOT_KEYS)
    if extra:
        raise InvalidElicitationSchema(f"requestedSchema: keyword {extra[0]!r} is not allowed at the top level")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise InvalidElicitationSchema('requestedSchema must have "properties" (an object)')
    for name, prop in properties.items():
        if not isinstance(name, str) or not name:
            raise InvalidElicitationSchema("requestedSchema: property names must be non-empty strings")
        _check_property(name, prop)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise InvalidElicitationSchema("requestedSchema: required must be a list of property names")
    for name in required:
        if name not in properties:
            raise InvalidElicitationSchema(f"requestedSchema: required property {name!r} is not in properties")
    for key in ("title", "description"):
        if key in schema and not isinstance(schema[key], str):
            raise InvalidElicitationSchema(f"requestedSchema: {key} must be a string")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidElicitationSchema(f"requestedSchema: {_short(exc.message)}") from None
    return schema


# -- answers -----------------------------------------------------------------------------------

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")

_format_checker = jsonschema.FormatChecker(formats=())


@_format_checker.checks("email")
def _email(value: object) -> bool:
    return not isinstance(value, str) or bool(_EMAIL_RE.fullmatch(value))


@_format_checker.checks("uri", raises=ValueError)
def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return bool(_SCHEME_RE.fullmatch(parts.scheme)) and bool(parts.netloc or parts.path)


@_format_checker.checks("date", raises=ValueError)
def _date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return bool(_DATE_RE.fullmatch(value)) and datetime.date.fromisoformat(value) is not None


@_format_checker.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _DATE_TIME_RE.fullmatch(value):
        return False
    datetime.datetime.fromisoformat(value.upper())  # Python >= 3.11 reads "Z"
    return True


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=_format_checker)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def validate_content(schema: dict[str, Any] | ElicitationSchema, content: Any) -> dict[str, Any]:
    """Check an accepted answer against the form; return the content to use.

    ``None`` counts as ``{}``; strings with NUL or invalid UTF-8 are refused (every database
    must be able to store the content); ``null`` values of properties that are not required
    are dropped (a client may send them for fields left empty). Fields that are not
    in the form are refused.

    :param schema: a form schema (validated here if it is a plain dict) or an :class:`ElicitationSchema`.
    :raises InvalidElicitationSchema: ``schema`` is not a valid form schema.
    :raises InvalidElicitationContent: naming every bad field (at most 10).
    """
    form = schema if isinstance(schema, ElicitationSchema) else ElicitationSchema(schema)
    return form.validate(content)


class ElicitationSchema:
    """A form schema checked when it is built, so a tool module defining an invalid one fails at import.

    ``ElicitationSchema({...}).schema`` is the validated dict (what is sent as
    ``requestedSchema``); :meth:`validate` checks an answer.

    :raises InvalidElicitationSchema: see :func:`validate_requested_schema`.
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = validate_requested_schema(schema)
        self._validator = _validator(self.schema)

    def __repr__(self) -> str:
        return f"ElicitationSchema(properties={list(self.schema['properties'])!r})"

    def validate(self, content: Any) -> dict[str, Any]:
        """See :func:`validate_content`."""
        if content is None:
            content = {}
        if not isinstance(content, dict):
            raise InvalidElicitationContent([{"field": "", "message": "the content must be an object"}])
        properties = self.schema["properties"]
        required = set(self.schema.get("required", []))
        content = {k: v for k, v in content.items() if not (v is None and k in properties and k not in required)}
        errors = [
            {"field": str(key), "message": "is not a field of this form"} for key in content if key not in properties
        ]
        errors += [
            {"field": key, "message": "contains characters that cannot be stored (NUL or invalid UTF-8)"}
            for key, value in content.items()
            if key in properties and not storable(value)
        ]
        for error in sorted(self._validator.iter_errors(content), key=lambda e: [str(p) for p in e.absolute_path]):
            if error.validator == "required":
                missing = [
                    n for n in error.validator_value if isinstance(error.instance, dict) and n not in error.instance
                ]
                errors.extend({"field": n, "message": "is required"} for n in missing)
            else:
                field = str(error.absolute_path[0]) if error.absolute_path else ""
                errors.append({"field": field, "message": _short(error.message)})
        unique = list({(e["field"], e["message"]): e for e in errors}.values())
        if unique:
            raise InvalidElicitationContent(unique[:_MAX_ERRORS])
        return content
