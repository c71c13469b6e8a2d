"""DRF views the drf_tools tests publish (the reference site's NoteSerializer and Note model)."""

from __future__ import annotations

from django.core.cache.backends.locmem import LocMemCache
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from project.api import IsNoteOwner, NoteSerializer
from project.models import Note


class TwoPerMinute(UserRateThrottle):
    """Two calls a minute per user, counted in a cache of its own (the test clears it)."""

    cache = LocMemCache("drf-tools-throttle", {})
    rate = "2/min"
    scope = "drf-tools-test"


class NoteViewSet(viewsets.ModelViewSet):
    """Notes for the tests."""

    serializer_class = NoteSerializer
    permission_classes = [IsAuthenticated, IsNoteOwner]
    queryset = Note.objects.all()

    def create(self, request, *args, **kwargs):
        """Write a note down."""
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer) -> None:
        serializer.save(owner=self.request.user)

    @action(detail=True, methods=["post"])
    def archive(self, request, pk=None):
        """Archive one note (its title gets a prefix)."""
        note = self.get_object()
        note.title = f"[archived] {note.title}"
        note.save(update_fields=["title"])
        return Response({"id": note.pk, "title": note.title})


class ThrottledViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = NoteSerializer
    queryset = Note.objects.all()
    throttle_classes = [TwoPerMinute]


class Greeting(serializers.Serializer):
    name = serializers.CharField(max_length=20)
    shout = serializers.BooleanField(default=False)


class GreetView(APIView):
    """Greet someone."""

    permission_classes = [IsAuthenticated]

    def post(self, request, lang: str):
        """Say hello in ``lang``."""
        data = Greeting(data=request.data)
        data.is_valid(raise_exception=True)
        text = {"en": "Hello", "fr": "Bonjour"}.get(lang, "Hi") + ", " + data.validated_data["name"]
        text = text.upper() if data.validated_data["shout"] else text
        return Response({"text": text, "user": request.user.get_username()}, status=status.HTTP_201_CREATED)


class RequestEcho(APIView):
    """What the view sees of its request."""

    def get(self, request):
        return Response(
            {
                "remote_addr": request.META.get("REMOTE_ADDR"),
                "url": request.build_absolute_uri(),
                "query": request.query_params.dict(),
                "user": request.user.get_username() if request.user.is_authenticated else None,
                "auth_is_principal": request.auth is not None and request.auth.user == request.user,
            }
        )
