"""Django models as MCP resources: :class:`ModelResource` (a resource template over a model).

::

    from mcp_oauth.mcp_server.registry import ModelResource, resources

    resources.registry.add(ModelResource(
        "notes://{pk}",
        model=Note,
        lookup="pk",
        queryset=lambda ctx: Note.objects.filter(owner=ctx.user),
        serializer=NoteSerializer,            # a DRF serializer class, or obj -> dict/str, or None
        name="note", mime_type="application/json",
    ))

    resources.registry.add(ModelResource(
        "notes://{pk}/attachment", model=Note, queryset=..., file_field="attachment",
        name="note-attachment", max_bytes=5 * 1024 * 1024,
    ))

* **Rows are reached only through ``queryset(ctx)``**: read, list, completion,
  subscription and notifications all filter it. A row outside it answers
  ``-32602`` "Resource not found", like a row that does not exist.
* The template's one variable is the ``lookup`` field; its value is converted with
  the model field's ``to_python`` (a value that fails: ``-32602`` naming it).
* ``resources/list`` lists the queryset's rows (sliced in SQL), named by
  ``title(obj)`` (default ``str(obj)``); completion of the variable offers the
  lookup values that start with what the user typed.
* ``file_field``: the content is that ``FileField``'s file, read from its storage as
  a ``blob`` (MIME type from ``mime_type``, else guessed from the file name); its
  size is checked against ``max_bytes`` *before* reading. An empty field is "not found".
* ``post_save`` / ``pre_delete`` / ``post_delete`` of the model send
  ``notifications/resources/updated`` to sessions subscribed to the row's URI and
  ``notifications/resources/list_changed`` to the live sessions whose user sees the
  row (see :mod:`mcp_oauth.mcp_server.registry.notify`), after the transaction commits.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import mcp_types as types
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.fields.files import FieldFile
from django.db.models.functions import Cast
from django.forms.models import model_to_dict
from rest_framework.serializers import BaseSerializer

from mcp_oauth.mcp_server.registry.base import call, scope_tuple
from mcp_oauth.mcp_server.registry.contents import Contents, ResourceNotFound, _annotations, _icons
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import invalid_uri, resource_too_large
from mcp_oauth.mcp_server.registry.items import ResourceTemplate
from mcp_oauth.mcp_server.registry.notify import connect_model_resource
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.registry.uritemplate import UriTemplate

__all__ = ["ModelResource"]

#: Most completion candidates read from the database.
COMPLETION_LIMIT = 100


def _is_drf_serializer(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseSerializer)


class ModelResource(ResourceTemplate):
    """A resource template whose variable is a lookup into ``queryset(ctx)``.

    :param uri_template: an RFC 6570 template with exactly one variable (the lookup).
    :param model: the Django model class.
    :param queryset: ``fn(ctx) -> QuerySet`` of the rows ``ctx``'s user may read (required:
        there is no "all rows" default).
    :param lookup: the field the variable names (default ``"pk"``).
    :param serializer: a DRF serializer class (``Serializer(obj, context={"request": …}).data``),
        a callable ``fn(obj)`` returning a dict, list or str, or None (``model_to_dict``).
    :param file_field: name of a ``FileField`` to serve as binary content instead.
    :param title: ``fn(obj) -> str``, the name of a row in ``resources/list`` (default ``str``).
    :param listed: list the rows in ``resources/list`` (default True).
    :raises ValueError: a template without exactly one variable, an unknown lookup or file field,
        a ``queryset`` that is not callable.
    """

    def __init__(
        self,
        uri_template: str,
        *,
        model: type[models.Model],
        queryset: Callable[[RequestContext], models.QuerySet],
        lookup: str = "pk",
        serializer: Any = None,
        file_field: str | None = None,
        name: str | None = None,
        title: Callable[[Any], str] | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        scopes: Iterable[str] | str = (),
        annotations: types.Annotations | Mapping[str, Any] | None = None,
        icons: Iterable[types.Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        max_bytes: int | None = None,
        listed: bool = True,
        notify: bool = True,
    ) -> None:
        parsed = UriTemplate(uri_template)
        if len(parsed.variables) != 1:
            raise ValueError(f"ModelResource {uri_template!r}: the template needs exactly one variable (the lookup)")
        if not callable(queryset):
            raise ValueError(f"ModelResource {uri_template!r}: queryset must be a callable taking the context")
        field = model._meta.pk if lookup == "pk" else model._meta.get_field(lookup)
        if not isinstance(field, models.Field):  # a reverse relation has no column to look a row up by
            raise ValueError(f"ModelResource {uri_template!r}: lookup {lookup!r} is a reverse relation, not a field")
        if file_field is not None:
            if not isinstance(model._meta.get_field(file_field), models.FileField):
                raise ValueError(f"ModelResource {uri_template!r}: {file_field!r} is not a FileField")
        if file_field is None and mime_type is None:
            mime_type = "application/json"
        super().__init__(
            name=name or cast(str, model._meta.model_name),  # set for every model class (None only in the stubs)
            title=None,
            description=description,
            mime_type=mime_type,
            scopes=scope_tuple(scopes, f"ModelResource {uri_template!r}"),
            annotations=_annotations(annotations),
            icons=_icons(icons),
            meta=meta,
            max_bytes=max_bytes,
            uri_template=parsed,
            fn=None,
            lister=self._list if listed else None,
            completers={},
        )
        self.model = model
        self.queryset = queryset
        self.lookup = lookup
        self.lookup_field = field
        self.variable = parsed.variables[0]
        self.serializer = serializer
        self.file_field = file_field
        self.row_title = title or str
        self.notify = notify
        self.completers = {self.variable: self._complete}

    def __repr__(self) -> str:
        return f"<ModelResource {self.template!r} over {self.model._meta.label}>"

    # --- rows ---------------------------------------------------------------------------

    def rows(self, ctx: RequestContext) -> models.QuerySet:
        """``queryset(ctx)``: the only way rows are reached. :raises TypeError: not a QuerySet."""
        rows = self.queryset(ctx)
        if not isinstance(rows, models.QuerySet) or rows.model is not self.model:
            raise TypeError(f"{self!r}: queryset(ctx) must return a QuerySet of {self.model._meta.label}")
        return rows

    def uri_for(self, obj: models.Model) -> str:
        """The URI of ``obj``."""
        value = obj.pk if self.lookup == "pk" else getattr(obj, self.lookup_field.attname)
        return self.uri_template.expand({self.variable: value})  # type: ignore[union-attr]

    def convert(self, uri: str, raw: dict[str, str]) -> dict[str, Any]:
        text = raw[self.variable]
        try:
            value = self.lookup_field.to_python(text)
        except DjangoValidationError:
            raise invalid_uri(
                uri, self.variable, f"must be a valid {self.lookup_field.get_internal_type()}, got {text[:50]!r}"
            ) from None
        if value is None or value == "":
            raise invalid_uri(uri, self.variable, "must not be empty")
        return {self.variable: value}

    def _get(self, ctx: RequestContext, value: Any) -> models.Model:
        try:
            obj = self.rows(ctx).filter(**{self.lookup: value}).first()
        except (ValueError, TypeError, DjangoValidationError):
            obj = None
        if obj is None:
            raise ResourceNotFound(str(value))
        return obj

    # --- reading ------------------------------------------------------------------------

    def _serialize(self, ctx: RequestContext, obj: models.Model) -> Any:
        if self.serializer is None:
            data = {
                name: (value.name or None) if isinstance(value, FieldFile) else value
                for name, value in model_to_dict(obj).items()
            }
            return json.loads(json.dumps(data, cls=DjangoJSONEncoder))
        if _is_drf_serializer(self.serializer):
            data = self.serializer(obj, context={"request": ctx.request}).data
            return json.loads(json.dumps(data, cls=DjangoJSONEncoder))
        return self.serializer(obj)

    def _read_sync(self, ctx: RequestContext, uri: str, value: Any) -> Any:
        obj = self._get(ctx, value)
        if self.file_field is None:
            return self._serialize(ctx, obj)
        fieldfile = getattr(obj, self.file_field)
        if not fieldfile:
            raise ResourceNotFound(uri)
        try:
            size = fieldfile.size
        except (OSError, ValueError):
            raise ResourceNotFound(uri) from None
        if size > self.limit():
            raise resource_too_large(uri, size, self.limit())
        try:
            with fieldfile.open("rb") as handle:
                data = handle.read(self.limit() + 1)
        except (OSError, ValueError):
            raise ResourceNotFound(uri) from None
        mime = self.mime_type or mimetypes.guess_type(fieldfile.name)[0] or "application/octet-stream"
        return types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))

    async def read(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> list[Contents]:
        value = await call(self._read_sync, ctx, uri, params[self.variable])
        return self.finish(uri, value)

    async def exists(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> bool:
        def check() -> bool:
            return self.rows(ctx).filter(**{self.lookup: params[self.variable]}).exists()

        return await call(check)

    def visible_to(self, ctx: RequestContext, obj: models.Model) -> bool:
        """Whether ``obj`` is in ``queryset(ctx)`` (sync; used by notifications)."""
        return self.rows(ctx).filter(pk=obj.pk).exists()

    # --- listing and completion ---------------------------------------------------------

    def _list(self, ctx: RequestContext) -> models.QuerySet:
        return self.rows(ctx).order_by("pk")

    def entry(self, item: Any) -> types.Resource:
        if isinstance(item, self.model):
            return types.Resource(
                uri=self.uri_for(item),
                name=str(self.row_title(item))[:200] or self.uri_for(item),
                mime_type=self.mime_type,
                annotations=self.annotations,
            )
        return super().entry(item)

    def _complete(self, ctx: RequestContext, value: str) -> types.Completion:
        rows = self.rows(ctx).annotate(_mcp_key=Cast(self.lookup, models.CharField()))
        matching = rows.filter(_mcp_key__startswith=value).order_by("_mcp_key")
        values = list(matching.values_list("_mcp_key", flat=True)[: COMPLETION_LIMIT + 1])
        total = matching.count() if len(values) > COMPLETION_LIMIT else len(values)
        return types.Completion(values=values[:COMPLETION_LIMIT], total=total, has_more=total > COMPLETION_LIMIT)

    # --- notifications ------------------------------------------------------------------

    def connect(self, registry: ResourceRegistry) -> None:
        """Connect the model's save/delete signals to the notifications (called by ``registry.add``)."""
        if not self.notify:
            return
        connect_model_resource(self)
