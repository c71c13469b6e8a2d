"""Protect a site's own Django views with the same bearer checks as the MCP endpoint."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.http import Http404, HttpRequest, HttpResponse

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, resolve_resource
from mcp_oauth.settings import mcp_oauth_settings


def require_bearer(
    view: Callable | None = None, *, scopes: Iterable[str] = (), resource: str | None = None
) -> Callable:
    """Decorate a view so it needs a valid access token for ``resource``.

    Usage: ``@require_bearer`` or ``@require_bearer(scopes=["notes:write"], resource="https://host/api")``.
    ``resource`` is a registered resource URI, or a path starting with "/" taken relative to
    ``MCP_OAUTH["BASE_URL"]`` when a request arrives (default: the default resource).
    On success ``request.mcp_principal`` is the :class:`~.authentication.BearerPrincipal`
    and ``request.user`` its user (``AnonymousUser`` for a token without one, whatever
    session cookie came along). Failures answer 401/403 with the Bearer challenge
    (see :func:`~.authentication.authenticate_bearer`); an unknown ``resource`` is 404.
    Works on sync and async views.
    """
    required = tuple(scopes)

    def check(request: HttpRequest) -> HttpResponse | None:
        uri = mcp_oauth_settings.absolute(resource) if resource and resource.startswith("/") else resource
        try:
            protected = resolve_resource(uri)
        except ProtectedResource.DoesNotExist:
            raise Http404("No such protected resource.") from None
        try:
            principal = mcp_oauth_settings.adapter.authenticate_request(request, protected, required)
        except BearerChallenge as challenge:
            return challenge.response()
        request.mcp_principal = principal  # type: ignore[attr-defined]  # documented attribute of the request
        # The token decides who is calling, never a session cookie sent along with it.
        request.user = principal.user if principal.user is not None else AnonymousUser()
        return None

    def decorate(func: Callable) -> Callable:
        if iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(request: HttpRequest, *args, **kwargs):
                failure = await sync_to_async(check)(request)
                return failure if failure is not None else await func(request, *args, **kwargs)

            wrapper = async_wrapper
        else:

            @functools.wraps(func)
            def wrapper(request: HttpRequest, *args, **kwargs):
                failure = check(request)
                return failure if failure is not None else func(request, *args, **kwargs)

        wrapper.csrf_exempt = True  # type: ignore[attr-defined]  # bearer-authenticated: no ambient credentials to forge
        return wrapper

    return decorate(view) if view is not None else decorate
