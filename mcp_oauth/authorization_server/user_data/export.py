"""A user's data export (GDPR Art. 15 right of access, Art. 20 portability): one JSON document.

:func:`export_user_data` returns a :class:`UserDataExport` holding the app's sections and those
receivers of :data:`mcp_oauth.signals.user_data_export` added (the ``elicitation`` app's, the
site's); :meth:`UserDataExport.stream` yields the document as text, reading each section's rows
lazily (``QuerySet.iterator``), so memory stays bounded whatever the number of rows (10,000
audit events stream like 10). Shape::

    {"format": "django-mcp-authz user data export", "version": 1,
     "generated_at": "2026-12-07T10:00:00+00:00",
     "user": {"id": 7, "username": "alice"},
     "sections": {"consents": [{...}, ...], "access_tokens": [...], ...}}

Never in it: a token, code, secret, hash, key, session or task id (values that are credentials
or handles), an encrypted task result. Token rows are metadata: client, scopes, resource, dates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import F
from django.http import StreamingHttpResponse
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models import AuditEvent, Consent, EnterpriseIdentity, McpSession, McpTask
from mcp_oauth.signals import user_data_export

log = logging.getLogger(__name__)

FORMAT = "django-mcp-authz user data export"
#: Rows read per database round trip.
CHUNK = 500
#: Text buffered before a chunk is yielded (characters).
FLUSH_AT = 64 * 1024

Rows = Iterable[dict[str, Any]] | Callable[[], Iterable[dict[str, Any]]]


class UserDataExport:
    """The sections of one user's export, streamed by :meth:`stream`."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.sections: list[tuple[str, Rows]] = []

    def add_section(self, name: str, rows: Rows) -> None:
        """Add a section ``name``: ``rows`` is an iterable of JSON-able dicts (dates, UUIDs and
        decimals are encoded), or a callable returning one; it is read only while streaming.

        :raises ValueError: a section of that name was added already.
        """
        if any(existing == name for existing, _ in self.sections):
            raise ValueError(f"export section {name!r} added twice")
        self.sections.append((name, rows))

    def stream(self) -> Iterator[str]:
        """The document as text chunks of about :data:`FLUSH_AT` characters."""
        encode = DjangoJSONEncoder(ensure_ascii=False).encode
        user = self.user
        head = {
            "format": FORMAT,
            "version": 1,
            "generated_at": timezone.now(),
            "user": {"id": user.pk, "username": user.get_username()},
        }
        buffer = [encode(head)[:-1], ', "sections": {']
        size = 0
        for index, (name, rows) in enumerate(self.sections):
            buffer.append(("" if index == 0 else ", ") + encode(name) + ": [")
            first = True
            for row in rows() if callable(rows) else rows:
                text = encode(row)
                buffer.append(text if first else ", " + text)
                first = False
                size += len(text)
                if size >= FLUSH_AT:
                    yield "".join(buffer)
                    buffer, size = [], 0
            buffer.append("]")
        buffer.append("}}\n")
        yield "".join(buffer)


def _values(queryset, *fields: str, **renamed: Any) -> Iterator[dict[str, Any]]:
    yield from queryset.order_by("pk").values(*fields, **renamed).iterator(chunk_size=CHUNK)


def _tasks(user_pk: Any) -> Iterator[dict[str, Any]]:
    rows = McpTask.objects.filter(user_id=user_pk)
    for row in _values(
        rows,
        "tool_name",
        "arguments",
        "status",
        "status_message",
        "created_at",
        "finished_at",
        "result",
        "sealed_result",
        "error",
        client_id=F("application__client_id"),
    ):
        if row.pop("sealed_result"):
            row["result"] = None
            row["result_encrypted"] = True  # the encrypted result is not exported
        yield row


def _own_sections(export: UserDataExport) -> None:
    pk = export.user.pk
    client = {"client_id": F("application__client_id"), "client_name": F("application__name")}
    export.add_section(
        "consents",
        lambda: _values(
            Consent.objects.filter(user_id=pk),
            "scope",
            "resources",
            "granted_at",
            "last_granted_at",
            "revoked_at",
            **client,
        ),
    )
    access = get_access_token_model().objects.filter(user_id=pk).exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    export.add_section("access_tokens", lambda: _values(access, "scope", "resource", "created", "expires", **client))
    export.add_section(
        "refresh_tokens",
        lambda: _values(
            get_refresh_token_model().objects.filter(user_id=pk), "resource", "created", "revoked", **client
        ),
    )
    export.add_section(
        "authorization_codes",
        lambda: _values(
            get_grant_model().objects.filter(user_id=pk), "scope", "resource", "created", "expires", **client
        ),
    )
    export.add_section(
        "id_tokens",
        lambda: _values(get_id_token_model().objects.filter(user_id=pk), "scope", "created", "expires", **client),
    )
    export.add_section(
        "mcp_sessions",
        lambda: _values(
            McpSession.objects.filter(user_id=pk),
            "protocol_version",
            "client_info",
            "created_at",
            "last_seen_at",
            "ended_at",
            client_id=F("application__client_id"),
            resource_uri=F("resource__uri"),
        ),
    )
    export.add_section("mcp_tasks", lambda: _tasks(pk))
    export.add_section(
        "enterprise_identities",
        lambda: _values(
            EnterpriseIdentity.objects.filter(user_id=pk),
            "subject",
            "created",
            "last_used_at",
            issuer=F("provider__issuer"),
        ),
    )
    export.add_section(
        "audit_events",
        lambda: _values(
            AuditEvent.objects.filter(user_id=pk), "kind", "created_at", "client_id", "ip_address", "detail"
        ),
    )


def export_user_data(user: Any) -> UserDataExport:
    """The export of ``user``: this app's sections, then those the receivers of
    :data:`~mcp_oauth.signals.user_data_export` add."""
    export = UserDataExport(user)
    _own_sections(export)
    user_data_export.send(sender=type(user), user=user, export=export)
    return export


_END = object()


class ChunkedStreamingResponse(StreamingHttpResponse):
    """A ``StreamingHttpResponse`` over a synchronous iterator that streams under ASGI too.

    Django's own ASGI path for a synchronous iterator warns and reads it whole into a list
    before sending the first byte (``sync_to_async(list)``): the export of a user with 100,000
    rows would sit in memory at once. Here each chunk is taken in the request's sync thread (the
    iterator's queries run where its database connection lives) and sent before the next is read.
    Under WSGI it is an ordinary ``StreamingHttpResponse``.
    """

    async def __aiter__(self):
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        parts = cast(Iterator[bytes], self.streaming_content)  # not is_async: a map over the iterator

        def take() -> object:
            return next(parts, _END)

        read = sync_to_async(take, thread_sensitive=True)
        while (chunk := await read()) is not _END:
            yield chunk


def export_response(user: Any) -> StreamingHttpResponse:
    """A streamed download of ``user``'s export (``application/json``, attachment
    ``mcp-data-<username>-<date>.json``, never cached); chunk by chunk under WSGI and ASGI."""
    response = ChunkedStreamingResponse(
        (chunk.encode("utf-8") for chunk in export_user_data(user).stream()), content_type="application/json"
    )
    name = "".join(ch for ch in user.get_username() if ch.isalnum() or ch in "-_.")[:60] or "user"
    response["Content-Disposition"] = f'attachment; filename="mcp-data-{name}-{timezone.now():%Y-%m-%d}.json"'
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response
