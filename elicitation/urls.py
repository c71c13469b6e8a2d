"""URLs of the elicitation pages. Include them once, with their namespace::

    path("elicitation/", include("elicitation.urls")),

The links handed to MCP clients are built from ``MCP_OAUTH["BASE_URL"]`` and these routes.
"""

from django.urls import path

from elicitation import views

app_name = "elicitation"

urlpatterns = [
    path("connections/", views.connections, name="connections"),
    path("callback/<slug:provider_slug>/", views.callback, name="callback"),
    path("<str:elicitation_id>/", views.start, name="start"),
]
