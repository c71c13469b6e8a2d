"""Where a user signs in before approving a client: the site's login page, or the app's own.

The authorization endpoint and the elicitation pages send a signed-out user to
:func:`login_url`:

1. ``MCP_OAUTH["LOGIN_URL"]`` when set (a path, a URL or a URL name), as it is;
2. else ``settings.LOGIN_URL`` when it leads to a view of the site or to another host;
3. else, when ``settings.LOGIN_URL`` is Django's default ``/accounts/login/`` (a site that
   never set up a login page), the app's own login page ``/oauth/login`` (:class:`MCPLoginView`);
4. else ``settings.LOGIN_URL`` as it is: the site chose it, and ``manage.py check`` reports
   ``mcp_oauth.W030`` because it resolves to no view.

``manage.py check`` renders the template of the login page chosen this way and reports
``mcp_oauth.E031`` when it cannot render (a missing template or base template, a broken tag).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import global_settings, settings
from django.contrib.auth.views import LoginView
from django.shortcuts import resolve_url
from django.urls import Resolver404, resolve, reverse
from django.utils.decorators import method_decorator

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.ui_headers import secure_ui_view

__all__ = ["LOGIN_URL_NAME", "MCPLoginView", "login_url"]

#: URL name of :class:`MCPLoginView` in ``mcp_oauth.urls``.
LOGIN_URL_NAME = "mcp-oauth-login"


def _routed(url: str) -> bool:
    if "://" in url or url.startswith("//"):
        return True  # a login page on another host: not ours to resolve
    try:
        resolve(urlsplit(url).path)
    except Resolver404:
        return False
    return True


def login_url() -> str:
    """The URL (path or absolute) signed-out users are sent to; see the module docstring for the order.

    Raises :class:`django.urls.NoReverseMatch` only when the app's own URLs are not routed either.
    """
    if mcp_oauth_settings.LOGIN_URL:
        return str(resolve_url(mcp_oauth_settings.LOGIN_URL))
    url = str(resolve_url(settings.LOGIN_URL))
    if _routed(url) or settings.LOGIN_URL != global_settings.LOGIN_URL:
        return url
    return reverse(LOGIN_URL_NAME)


@method_decorator(secure_ui_view, name="dispatch")
class MCPLoginView(LoginView):
    """The app's login page (``/oauth/login``): Django's ``LoginView`` with ``mcp_oauth/login.html``.

    It carries the authorization request in ``next``, so it cannot be framed and sends no
    referrer (:data:`mcp_oauth.shared.ui_headers.UI_SECURITY_HEADERS`, as the consent page). After
    signing in the user goes to ``next`` (a URL of this site only, as ``LoginView`` checks), else
    to ``LOGIN_REDIRECT_URL`` when the site routes it, else
    back to this page, which then says who is signed in. Context besides
    ``LoginView``'s: ``site_host`` (the host of ``BASE_URL``); the template names the client asking
    with ``{% authorization_request next %}`` (:mod:`mcp_oauth.templatetags.mcp_oauth_pages`).
    """

    template_name = "mcp_oauth/login.html"

    def get_default_redirect_url(self) -> str:
        url = str(resolve_url(settings.LOGIN_REDIRECT_URL))
        return url if _routed(url) else reverse(LOGIN_URL_NAME)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["site_host"] = urlsplit(mcp_oauth_settings.BASE_URL or "").hostname or self.request.get_host()
        return context
