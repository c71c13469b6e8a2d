"""The URLs of the elicitation pages (elicitation.urls) under their namespace, as the reference
site includes them (``path("elicitation/", include("elicitation.urls"))``)."""

from __future__ import annotations

import pytest
from django.urls import NoReverseMatch, resolve, reverse

from elicitation import views


def test_the_routes_reverse_to_their_paths():
    assert reverse("elicitation:connections") == "/elicitation/connections/"
    assert reverse("elicitation:callback", args=["acme-2"]) == "/elicitation/callback/acme-2/"
    assert reverse("elicitation:start", args=["e_4f2a"]) == "/elicitation/e_4f2a/"


def test_the_paths_resolve_to_the_views():
    assert resolve("/elicitation/connections/").func is views.connections
    callback = resolve("/elicitation/callback/github/")
    assert (callback.func, callback.kwargs) == (views.callback, {"provider_slug": "github"})
    start = resolve("/elicitation/abc123/")
    assert (start.func, start.kwargs, start.namespace) == (views.start, {"elicitation_id": "abc123"}, "elicitation")


def test_connections_is_not_taken_for_an_elicitation_id():
    # "connections/" comes first, so no elicitation id can shadow the connections page
    assert resolve("/elicitation/connections/").url_name == "connections"


def test_a_provider_slug_must_be_a_slug():
    with pytest.raises(NoReverseMatch):
        reverse("elicitation:callback", args=["not a slug"])
