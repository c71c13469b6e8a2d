"""A site whose only URLs are the app's (``path("", include("mcp_oauth.urls"))``): no login page of its own."""

from django.urls import include, path

urlpatterns = [path("", include("mcp_oauth.urls"))]
