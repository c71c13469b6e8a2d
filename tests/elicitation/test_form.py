"""Form-mode elicitation (MCP 2025-11-25 "Elicitation"): schema restriction, answer validation,
capability gating, the Elicitation log, and end to end with the official Python SDK client."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
from asgiref.sync import async_to_sync
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestFormParams, ElicitResult

from elicitation.api import (
    ElicitationError,
    ElicitationTimeout,
    ElicitationUnsupported,
    FormResult,
    elicit_form,
    supports_form,
)
from elicitation.form import (
    ElicitationSchema,
    InvalidElicitationContent,
    InvalidElicitationSchema,
    validate_content,
    validate_requested_schema,
)
from elicitation.models import Elicitation
from mcp_oauth.mcp_server.tools import McpError, ToolContext, registry
from mcp_oauth.models import McpSession
from project.mcp_tools import ASK_NAME_FORM
from tests.e2e.test_python_sdk import (  # noqa: F401
    PASSWORD,
    USERNAME,
    MemoryStorage,
    live,
    make_provider,
    run,
    with_browser,
)
from tests.support.live import HeadlessBrowser

FULL_FORM = {
    "type": "object",
    "title": "Profile",
    "description": "Tell us about you",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 100, "default": "Ada"},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "seen": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "height": {"type": "number", "minimum": 0.5, "maximum": 2.5},
        "subscribe": {"type": "boolean", "default": False},
        "colour": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"], "default": "r"},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
        "pets": {
            "type": "array",
            "items": {"anyOf": [{"const": "cat", "title": "Cat"}, {"const": "dog", "title": "Dog"}]},
            "default": ["cat"],
        },
    },
    "required": ["name", "age"],
}


def form(**properties) -> dict:
    return {"type": "object", "properties": properties}


# -- schema restriction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        FULL_FORM,
        form(),
        form(ok={"type": "boolean"}),
        {"$schema": "https://json-schema.org/draft/2020-12/schema", **form(n={"type": "number"}), "required": ["n"]},
        ASK_NAME_FORM.schema,
    ],
)
def test_valid_schemas_are_accepted_and_copied(schema):
    checked = validate_requested_schema(schema)
    assert checked == schema and checked is not schema


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        (form(address={"type": "object", "properties": {"street": {"type": "string"}}}), "'address'"),
        (form(nums={"type": "array", "items": {"type": "integer"}}), "'nums'"),
        (form(anything={}), "'anything'"),
        (form(ref={"$ref": "#/defs/x", "type": "string"}), "'ref'"),
        (form(pattern={"type": "string", "pattern": "^a"}), "'pattern'"),
        (form(email={"type": "string", "format": "hostname"}), "'email'"),
        (form(short={"type": "string", "minLength": 5, "maxLength": 2}), "'short'"),
        (form(neg={"type": "string", "maxLength": -1}), "'neg'"),
        (form(age={"type": "integer", "minimum": 0.5}), "'age'"),
        (form(age={"type": "integer", "minimum": 10, "maximum": 1}), "'age'"),
        (form(colour={"type": "string", "enum": []}), "'colour'"),
        (form(colour={"type": "string", "enum": ["r", "r"]}), "'colour'"),
        (form(colour={"type": "string", "enum": [1, 2]}), "'colour'"),
        (form(colour={"type": "string", "enum": ["r", "g"], "enumNames": ["Red"]}), "'colour'"),
        (form(size={"type": "string", "oneOf": [{"const": "s"}, {"title": "no const"}]}), "'size'"),
        (form(tags={"type": "array", "items": {"type": "string"}}), "'tags'"),
        (
            form(tags={"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 3, "maxItems": 1}),
            "'tags'",
        ),
        (form(flag={"type": "boolean", "default": "yes"}), "'flag'"),
        (form(age={"type": "integer", "maximum": 10, "default": 11}), "'age'"),
        (form(colour={"type": "string", "enum": ["r"], "default": "x"}), "'colour'"),
        (form(name={"type": ["string", "null"]}), "'name'"),
        ({**form(name={"type": "string"}), "required": ["nmae"]}, "'nmae'"),
        ({**form(name={"type": "string"}), "additionalProperties": True}, "'additionalProperties'"),
        ({"type": "array", "items": {"type": "string"}}, '"type": "object"'),
        ({"type": "object"}, '"properties"'),
        ("not a schema", "JSON object"),
    ],
)
def test_invalid_schemas_are_refused_naming_the_property(schema, named):
    with pytest.raises(InvalidElicitationSchema) as caught:
        validate_requested_schema(schema)
    assert named in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_an_invalid_form_fails_when_it_is_defined():
    with pytest.raises(InvalidElicitationSchema, match="'where'"):
        ElicitationSchema(form(where={"type": "object"}))


# -- answers -----------------------------------------------------------------------------------

VALID_ANSWER = {
    "name": "Ada",
    "email": "ada@example.com",
    "site": "https://example.com/ada",
    "born": "1815-12-10",
    "seen": "2025-11-25T10:00:00Z",
    "age": 36,
    "height": 1.6,
    "subscribe": True,
    "colour": "g",
    "size": "s",
    "tags": ["a", "c"],
    "pets": ["dog"],
}


def test_valid_content_is_returned():
    assert validate_content(FULL_FORM, VALID_ANSWER) == VALID_ANSWER
    # null for an optional field left empty counts as absent
    assert validate_content(FULL_FORM, {"name": "Ada", "age": 1, "email": None}) == {"name": "Ada", "age": 1}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"age": "old"}, "age"),
        ({"age": 151}, "age"),
        ({"age": 3.5}, "age"),
        ({"age": None}, "age"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"email": "not-an-email"}, "email"),
        ({"site": "no scheme here"}, "site"),
        ({"born": "1815-13-40"}, "born"),
        ({"born": "10/12/1815"}, "born"),
        ({"seen": "2025-11-25 10:00"}, "seen"),
        ({"colour": "blue"}, "colour"),
        ({"size": "m"}, "size"),
        ({"tags": []}, "tags"),
        ({"tags": ["a", "b", "c"]}, "tags"),
        ({"tags": ["z"]}, "tags"),
        ({"pets": ["fish"]}, "pets"),
        ({"subscribe": "yes"}, "subscribe"),
        ({"password": "hunter2"}, "password"),
        ({"name": "Ada\x00"}, "name"),
        ({"email": "a\ud800@example.com"}, "email"),
        # Attack: ``$`` in a ``re.match`` pattern matches before a final newline.
        ({"email": "ada@example.com\n"}, "email"),
        ({"born": "1815-12-10\n"}, "born"),
        ({"seen": "2025-11-25T10:00:00Z\n"}, "seen"),
    ],
)
def test_invalid_content_names_the_field(change, field):
    with pytest.raises(InvalidElicitationContent) as caught:
        validate_content(FULL_FORM, {**VALID_ANSWER, **change})
    assert [e["field"] for e in caught.value.errors] == [field]
    assert f"{field}:" in str(caught.value)


def test_missing_required_fields_are_all_named():
    with pytest.raises(InvalidElicitationContent) as caught:
        validate_content(FULL_FORM, {})
    assert {e["field"] for e in caught.value.errors} == {"name", "age"}
    with pytest.raises(InvalidElicitationContent, match="must be an object"):
        validate_content(FULL_FORM, ["Ada"])


# -- capability gating -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capabilities", "allowed"),
    [
        ({}, False),
        (None, False),
        ({"sampling": {}}, False),
        ({"elicitation": {}}, True),
        ({"elicitation": {"form": {}}}, True),
        ({"elicitation": {"form": {}, "url": {}}}, True),
        ({"elicitation": {"url": {}}}, False),
        ({"elicitation": True}, False),
        ({"elicitation": {"form": True}}, False),
    ],
)
def test_supports_form(capabilities, allowed):
    assert supports_form(capabilities) is allowed


@dataclass
class ScriptedContext(ToolContext):
    """A ToolContext whose client answers ``send_request`` with ``answer`` (or raises it)."""

    answer: Any = None
    sent: list = field(default_factory=list)

    async def send_request(self, method, params=None, *, timeout=None, request_id=None, poll=None, poll_interval=0.25):
        self.sent.append((method, params, timeout))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


async def _sink(message):  # pragma: no cover - send_request is scripted
    raise AssertionError("nothing is sent through the sink")


def scripted(user, app, resource, capabilities, answer=None, protocol_version="2025-11-25", streaming=True):
    session = McpSession.objects.create(
        user=user,
        application=app,
        resource=resource,
        protocol_version=protocol_version,
        client_capabilities=capabilities,
    )
    principal = SimpleNamespace(
        user=user, application=app, client_id=app.client_id, scopes=frozenset({"mcp"}), resource=resource
    )
    return ScriptedContext(
        principal=principal,
        session=session,
        request=None,
        request_id=7,
        protocol_version=protocol_version,
        tool_name="ask_name",
        sink=_sink if streaming else None,
        answer=answer,
    )


ACCEPT = {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.django_db
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"url": {}}}, {"sampling": {}}])
def test_without_form_capability_nothing_is_sent(user, public_app, resource, capabilities):
    ctx = scripted(user, public_app, resource, capabilities, answer=ACCEPT)
    with pytest.raises(ElicitationUnsupported, match="cannot ask questions"):
        async_to_sync(elicit_form)(ctx, "Name?", ASK_NAME_FORM)
    assert ctx.sent == [] and not Elicitation.objects.exists()
    # through the registry the tool call fails with that message (isError), not a JSON-RPC error
    result = async_to_sync(registry.get("ask_name").call)(ctx, {})
    assert result.is_error and "cannot ask questions" in result.content[0].text
    assert ctx.sent == []


@pytest.mark.django_db
def test_a_call_without_a_stream_cannot_elicit(user, public_app, resource):
    ctx = scripted(user, public_app, resource, {"elicitation": {}}, answer=ACCEPT, streaming=False)
    with pytest.raises(ElicitationUnsupported, match="without a stream"):
        async_to_sync(elicit_form)(ctx, "Name?", ASK_NAME_FORM)
    assert ctx.sent == [] and not Elicitation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("capabilities", "protocol_version", "with_mode"),
    [
        ({"elicitation": {}}, "2025-11-25", True),
        ({"elicitation": {"form": {}}}, "2025-11-25", True),
        ({"elicitation": {"form": {}, "url": {}}}, "2025-11-25", True),
        ({"elicitation": {}}, "2025-06-18", False),
    ],
)
def test_form_capability_sends_elicitation_create(
    user, public_app, resource, capabilities, protocol_version, with_mode
):
    ctx = scripted(user, public_app, resource, capabilities, answer=ACCEPT, protocol_version=protocol_version)
    result = async_to_sync(elicit_form)(ctx, "Name?", ASK_NAME_FORM.schema, timeout=12)
    assert result == FormResult("accept", {"name": "Ada"})
    ((method, params, timeout),) = ctx.sent
    assert method == "elicitation/create" and timeout == 12
    assert params["message"] == "Name?" and params["requestedSchema"] == ASK_NAME_FORM.schema
    assert ("mode" in params) is with_mode and params.get("mode", "form") == "form"
    ElicitRequestFormParams.model_validate(params)  # what the SDK client parses
    row = Elicitation.objects.get()
    assert (row.status, row.mode, row.content, row.user, row.session_id) == (
        "accepted",
        "form",
        {"name": "Ada"},
        user,
        ctx.session.pk,
    )
    assert row.request_id == "7" and row.completed_at is not None and row.expires_at > row.created_at
    assert len(row.elicitation_id) >= 22  # >= 128 bits of base64url


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer", "raises", "status"),
    [
        ({"action": "decline"}, None, "declined"),
        ({"action": "cancel"}, None, "cancelled"),
        ({"action": "accept", "content": {"name": "Ada", "age": "old"}}, InvalidElicitationContent, "invalid"),
        ({"action": "maybe"}, ElicitationError, "cancelled"),
        ("garbage", ElicitationError, "cancelled"),
        ({"action": "accept", "content": ["Ada"]}, InvalidElicitationContent, "invalid"),
        (TimeoutError(), ElicitationTimeout, "expired"),
        (McpError(-32600, "Elicitation not supported"), ElicitationError, "cancelled"),
        (asyncio.CancelledError(), asyncio.CancelledError, "cancelled"),
    ],
)
def test_outcomes_are_recorded(user, public_app, resource, answer, raises, status):
    ctx = scripted(user, public_app, resource, {"elicitation": {"form": {}}}, answer=answer)
    if raises is None:
        result = async_to_sync(elicit_form)(ctx, "Name?", ASK_NAME_FORM)
        assert result == FormResult(answer["action"])
    else:
        with pytest.raises(raises) as caught:
            async_to_sync(elicit_form)(ctx, "Name?", ASK_NAME_FORM)
        if raises is InvalidElicitationContent and isinstance(answer["content"], dict):
            assert "age:" in str(caught.value)
    row = Elicitation.objects.get()
    assert row.status == status and row.content is None and row.completed_at is not None
    if status == "invalid":
        assert row.error == str(caught.value)


@pytest.mark.django_db
def test_an_invalid_schema_or_message_is_refused_before_anything_is_sent(user, public_app, resource):
    ctx = scripted(user, public_app, resource, {"elicitation": {}}, answer=ACCEPT)
    with pytest.raises(InvalidElicitationSchema, match="'x'"):
        async_to_sync(elicit_form)(ctx, "Name?", form(x={"type": "object"}))
    with pytest.raises(ValueError, match="message"):
        async_to_sync(elicit_form)(ctx, "  ", ASK_NAME_FORM)
    assert ctx.sent == [] and not Elicitation.objects.exists()


@pytest.mark.django_db
def test_admin_lists_and_filters_elicitations(admin_client, user):
    Elicitation.objects.create(
        message="What is your name?", requested_schema=ASK_NAME_FORM.schema, user=user, status="accepted"
    )
    page = admin_client.get("/admin/elicitation/elicitation/", {"status": "accepted", "mode": "form", "q": "name"})
    assert page.status_code == 200 and "What is your name?" in page.content.decode()
    row = Elicitation.objects.get()
    assert admin_client.get(f"/admin/elicitation/elicitation/{row.pk}/change/").status_code == 200
    assert admin_client.get("/admin/elicitation/elicitation/add/").status_code == 403


# -- end to end: the official Python SDK client against the live server -------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_ask_name_end_to_end_with_the_python_sdk(live):  # the imported fixture
    answers = [
        ElicitResult(action="accept", content={"name": "Ada", "age": 36}),
        ElicitResult(action="accept", content={"name": "Ada", "age": "old"}),
        ElicitResult(action="decline"),
    ]
    asked = []

    async def callback(ctx, params):
        asked.append(params)
        return answers.pop(0)

    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    provider = make_provider(live, storage, browser)

    async def sessions():
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            async with Client(
                streamable_http_client(live.mcp_url, http_client=http), mode="legacy", elicitation_callback=callback
            ) as client:
                results = [await client.call_tool("ask_name", {}) for _ in range(3)]
            # a client without an elicitation callback declares no elicitation capability
            async with Client(streamable_http_client(live.mcp_url, http_client=http), mode="legacy") as client:
                results.append(await client.call_tool("ask_name", {}))
        return results

    accepted, invalid, declined, unsupported = run(with_browser(browser, sessions()))

    assert not accepted.is_error, accepted
    assert accepted.content[0].text == "Hello, Ada! You are 36."
    assert invalid.is_error and "age:" in invalid.content[0].text
    assert not declined.is_error and "declined" in declined.content[0].text
    assert unsupported.is_error and "cannot ask questions" in unsupported.content[0].text

    assert len(asked) == 3
    for params in asked:
        assert isinstance(params, ElicitRequestFormParams)
        assert params.mode == "form" and params.message == "What is your name?"
        assert params.requested_schema == ASK_NAME_FORM.schema

    rows = list(Elicitation.objects.order_by("created_at", "id"))
    assert [row.status for row in rows] == ["accepted", "invalid", "declined"]
    assert rows[0].content == {"name": "Ada", "age": 36}
    assert rows[1].content is None and "age" in rows[1].error
    assert rows[2].content is None
    assert {row.user.get_username() for row in rows} == {USERNAME}
    assert len({row.session_id for row in rows}) == 1 and rows[0].session_id is not None
    assert len({row.elicitation_id for row in rows}) == 3
