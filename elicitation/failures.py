"""Why a third-party connection failed, in plain words (the callback page and the tool error).

A URL elicitation of kind ``connect`` that the provider refused (RFC 6749 §4.1.2.1 ``error`` on
the redirect) or broke (its token endpoint failed the code exchange, RFC 6749 §5.2) is finished
as ``declined`` (``access_denied``) or ``failed`` with ``error = "provider: <code>"``: only the
OAuth error code (ASCII, at most 64 characters, checked before it is stored), never the
provider's free text nor any token or code. :func:`describe` turns it into a sentence.
"""

from __future__ import annotations

import re

__all__ = ["PREFIX", "describe", "provider_error", "tool_error_text"]

#: ``Elicitation.error`` of an outcome the provider decided.
PREFIX = "provider: "

#: The shape of the registered OAuth error codes (RFC 6749 §4.1.2.1, §5.2: ``invalid_grant``, …).
#: NQSCHAR would allow markup (``<``, ``'``, ``(``); a code outside this shape is not kept nor
#: shown (a hostile provider reflects nothing through the page or the tool error).
_CODE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

_PLAIN = {
    "access_denied": "access was refused at {name}",
    "invalid_grant": "{name} refused the sign-in code when this site exchanged it",
    "server_error": "{name} had an internal error",
    "temporarily_unavailable": "{name} is temporarily unavailable",
    "network_error": "{name} could not be reached",
    "invalid_response": "{name} sent an answer this site could not read",
    "invalid_client": "{name} did not recognise this site's credentials",
    "unauthorized_client": "{name} does not allow this site to connect accounts",
    "invalid_scope": "{name} refused the access this site asked for",
}


def provider_error(code: object) -> str:
    """The ``error`` value stored for the provider's OAuth error ``code``: ``"provider: <code>"``, or
    ``"provider: invalid error code"`` for a code that is not a plain token (letters, digits, ``_.-``)."""
    return PREFIX + (code if isinstance(code, str) and _CODE_RE.fullmatch(code) else "invalid error code")


def describe(provider_name: str, error: str) -> str:
    """A sentence for ``error`` (an ``Elicitation.error``): what went wrong, and its code.

    ``describe("GitHub", "provider: invalid_grant")`` ->
    ``"GitHub refused the sign-in code when this site exchanged it (invalid_grant)"``.
    """
    code = error[len(PREFIX) :] if error.startswith(PREFIX) else error
    if not code:
        return f"the connection to {provider_name} failed"
    plain = _PLAIN.get(code, "{name} answered with an error").format(name=provider_name)
    return f"{plain} ({code})"


def tool_error_text(provider_name: str, status: str, error: str) -> str:
    """The tool error of a connection the provider refused (``declined``) or broke (``failed``)."""
    if status == "declined":
        return f"Your {provider_name} account was not connected: {describe(provider_name, error)}."
    return f"Connecting your {provider_name} account failed: {describe(provider_name, error)}."
