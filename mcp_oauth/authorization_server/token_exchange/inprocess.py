"""Token exchange in process, for tools: :meth:`mcp_oauth.mcp_server.transport.context.ToolContext.exchange_token`.

A tool holds the call's access token; :func:`exchange_token` runs the token endpoint's own grant
(:class:`~.grant.TokenExchangeGrant`, with every check, the adapter's decision, the audit events)
for it, the exchanging client being the subject token's client: the subject token, presented to
this very server, is the client's credential here (:func:`inprocess_client`, read by the request
validator instead of client authentication — reachable only from this module, never from a
request). No HTTP round trip, no client secret in the site's settings.

A DPoP-bound subject token is refused (``invalid_grant``): the new token would be bound to the
client's key, of which the server holds no proof.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.client_registry.clients import token_request
from mcp_oauth.authorization_server.token_exchange.decision import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.authorization_server.views import MCPTokenView
from mcp_oauth.mcp_server.transport.token_exchange import ExchangedToken, TokenExchangeError
from mcp_oauth.resource_server.cache import token_checksum
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["exchange_token", "inprocess_client"]

_client: ContextVar[Any] = ContextVar("mcp_oauth_token_exchange_client", default=None)


def inprocess_client() -> Any:
    """The client (a DOT ``Application``) of the in-process exchange running now, else None."""
    return _client.get()


@contextmanager
def _as_client(application: Any) -> Iterator[None]:
    token = _client.set(application)
    try:
        yield
    finally:
        _client.reset(token)


def exchange_token(subject_token: str, resource: str, scope: str | Iterable[str] | None = None) -> ExchangedToken:
    """Exchange ``subject_token`` for a token of ``resource`` (RFC 8693), as its own client.

    :param scope: space-separated or an iterable; None: the subject token's scopes the resource serves.
    :raises TokenExchangeError: the token endpoint's refusal (RFC 6749 §5.2 / RFC 8693 §2.2.2 code).
    """
    if not isinstance(subject_token, str) or not subject_token:
        raise TokenExchangeError("invalid_request", "subject_token is required.")
    row = (
        get_access_token_model()
        .objects.select_related("application")
        .filter(token_checksum=token_checksum(subject_token))
        .first()
    )
    if row is None or row.application is None:
        raise TokenExchangeError("invalid_grant", "The subject token is not a valid access token of this server.")
    application = row.application
    params = {
        "grant_type": TOKEN_EXCHANGE_GRANT_TYPE,
        "client_id": application.client_id,
        "subject_token": subject_token,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "resource": resource,
    }
    if scope is not None:
        params["scope"] = scope if isinstance(scope, str) else " ".join(scope)
    # The view's server (DOT caches it): same grants, validator and token generators.
    server = MCPTokenView.get_oauthlib_core().server
    uri = mcp_oauth_settings.absolute(reverse("oauth2_provider:token"))
    with token_request(), _as_client(application):
        _headers, body, status = server.create_token_response(
            uri, "POST", urlencode(params), {"Content-Type": "application/x-www-form-urlencoded"}, None
        )
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = {}
    if status != 200 or not isinstance(data, dict) or "access_token" not in data:
        raise TokenExchangeError(str(data.get("error") or "server_error"), str(data.get("error_description") or ""))
    return ExchangedToken(
        access_token=data["access_token"],
        token_type=data.get("token_type", "Bearer"),
        expires_in=int(data.get("expires_in", 0)),
        scope=data.get("scope", ""),
        resource=resource,
        issued_token_type=data.get("issued_token_type", ACCESS_TOKEN_TYPE),
    )
