"""A small bearer-protected JSON API of the reference site.

``/api/notes/`` (:class:`NoteViewSet`, Django REST framework) serves the token user's notes; the same
ViewSet is published as MCP tools in ``mcp_tools.py``.

``GET /api/profile`` (scope ``profile``, tokens for the resource ``<site>/api``) answers the token's user: this is what the
``demo_profile`` tool of *another* site reads once its user connected this site as a
third-party provider (URL-mode elicitation). It is also the provider's "account endpoint"
that labels the connection.
"""

from django.http import JsonResponse
from django.views.decorators.http import require_GET
from rest_framework import filters, serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission, IsAuthenticated

from mcp_oauth.resource_server.challenges import challenge_response
from mcp_oauth.resource_server.decorators import require_bearer
from mcp_oauth.resource_server.drf import MCPBearerAuthentication

from .apps import API_PATH
from .models import Note


@require_GET
@require_bearer(scopes=["profile"], resource="/api")
def profile(request):
    """``{"sub", "username", "email", "name", "date_joined"}`` of the token's user (``Cache-Control: no-store``).

    A token without a user (client credentials) gets 403 ``insufficient_scope`` with its bearer
    challenge (RFC 6750 §3.1): there is no profile.
    """
    user = request.mcp_principal.user
    if user is None:
        return challenge_response(
            request.mcp_principal.resource, 403, error="insufficient_scope", error_description="This token has no user."
        )
    response = JsonResponse(
        {
            "sub": str(user.pk),
            "username": user.get_username(),
            "email": user.email,
            "name": user.get_full_name() or user.get_username(),
            "date_joined": user.date_joined.isoformat(),
        }
    )
    response["Cache-Control"] = "no-store"
    return response


class NoteSerializer(serializers.ModelSerializer):
    """A note as the API shows it; ``owner`` (the username) and the dates are read-only."""

    owner = serializers.ReadOnlyField(source="owner.username", help_text="Who owns the note (set by the server).")

    class Meta:
        model = Note
        fields = ["id", "owner", "title", "body", "created_at", "updated_at"]
        extra_kwargs = {
            "title": {"help_text": "A short title (at most 200 characters)."},
            "body": {"help_text": "The note's text."},
        }


class IsNoteOwner(BasePermission):
    """Only the owner of a note reads, changes or deletes it (object permission: 403 for the others)."""

    message = "You do not own this note."

    def has_object_permission(self, request, view, obj) -> bool:
        return obj.owner_id == request.user.pk


class NotePagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


class NoteSearch(filters.SearchFilter):
    """DRF's search (``?search=``), its text at most :attr:`max_length` characters: longer is 400
    (each word becomes a ``LIKE`` pattern; SQLite refuses one past 50,000 bytes)."""

    max_length = 200

    def get_search_terms(self, request) -> list[str]:
        text = request.query_params.get(self.search_param, "")
        if len(text) > self.max_length:
            raise ValidationError(
                {self.search_param: [f"Ensure this field has no more than {self.max_length} characters."]}
            )
        return super().get_search_terms(request)


class NoteViewSet(viewsets.ModelViewSet):
    """Your notes: a title and a text, private to you.

    ``/api/notes/`` over HTTP (bearer tokens for the resource ``<site>/api``, scope ``profile``) and
    the tools ``notes_list``, ``notes_create``, ``notes_retrieve``, ``notes_partial_update``,
    ``notes_destroy`` over MCP (``mcp_tools.py``): one view, one set of permissions.
    """

    serializer_class = NoteSerializer
    authentication_classes = [MCPBearerAuthentication]
    permission_classes = [IsAuthenticated, IsNoteOwner]
    pagination_class = NotePagination
    filter_backends = [NoteSearch]
    search_fields = ["title", "body"]
    mcp_resource = API_PATH

    def get_queryset(self):
        # The list shows your own notes; a detail action reaches any note, and IsNoteOwner refuses
        # another user's with 403 (the same refusal over HTTP and as a tool).
        notes = Note.objects.select_related("owner")
        return notes.filter(owner=self.request.user) if self.action == "list" else notes

    def perform_create(self, serializer) -> None:
        serializer.save(owner=self.request.user)
