"""The security headers of every page a user opens in a browser: consent, login, connected apps, elicitation.

These pages carry an authorization request (in the query or in ``next``) or a form that acts for
the user, so they must not be framed (RFC 9700 §4.16: clickjacking), cached, or leak their URL to
other sites (RFC 9700 §4.2.4). One set of headers, applied one way:

* :func:`secure_ui` sets :data:`UI_SECURITY_HEADERS` on a response and returns it;
* :func:`secure_ui_view` decorates a view (a function, or ``SomeView.as_view()``) to do the same
  with every response it returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.http.response import HttpResponseBase

__all__ = ["UI_SECURITY_HEADERS", "secure_ui", "secure_ui_view"]

#: The headers of a browser page (values set as they are, replacing any set before).
UI_SECURITY_HEADERS: dict[str, str] = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'; form-action 'self' http: https:",
    # Not "no-referrer": with it browsers send "Origin: null" on the form POSTs and CSRF refuses them.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

#: Any Django response type (what :func:`secure_ui` is given, it returns).
ResponseT = TypeVar("ResponseT", bound=HttpResponseBase)


def secure_ui(response: ResponseT) -> ResponseT:
    """Set :data:`UI_SECURITY_HEADERS` on ``response``; returns the same response."""
    for header, value in UI_SECURITY_HEADERS.items():
        response[header] = value
    return response


def secure_ui_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a view so that every response it returns carries :data:`UI_SECURITY_HEADERS`."""

    @functools.wraps(view)
    def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
        return secure_ui(view(request, *args, **kwargs))

    return wrapper
