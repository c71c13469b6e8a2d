"""A site whose only URLs are the apps' (``include("mcp_oauth.urls")``, the elicitation pages): no login page of its own."""

from django.urls import include, path

urlpatterns = [
    path("elicitation/", include("elicitation.urls")),
    path("", include("mcp_oauth.urls")),
]
