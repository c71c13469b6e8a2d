"""The reference site's own data: notes owned by users (served as MCP resources by ``mcp_resources.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Note(models.Model):
    """A user's note; ``notes://{pk}`` (JSON) and ``notes://{pk}/attachment`` (the file) for its owner only."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    attachment = models.FileField(upload_to="notes/", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.title
