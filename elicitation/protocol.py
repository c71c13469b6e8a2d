"""Elicitation on the wire: capability checks and message shapes, for both protocol eras.

* 2025-11-25 sessions (SEP-1036): ``elicitation/create`` requests (form, URL with
  ``elicitationId``), JSON-RPC error ``-32042`` (:class:`UrlElicitationRequired`).
* 2026-07-28 requests: ``inputRequests`` entries of an ``input_required`` result
  (:func:`form_input_request`, :func:`url_input_request`: URL entries carry no ``elicitationId``).

No database writes happen here (:mod:`elicitation.service` owns the rows).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from elicitation.models import Elicitation
from mcp_oauth.mcp_server.tools import McpError
from mcp_oauth.mcp_server.transport.jsonrpc import URL_ELICITATION_REQUIRED

__all__ = [
    "FIRST_REVISION_WITH_MODES",
    "FIRST_REVISION_WITH_URL_MODE",
    "REQUEST_ID_PREFIX",
    "URL_ELICITATION_REQUIRED",
    "UrlElicitationRequired",
    "describe",
    "form_input_request",
    "form_params",
    "schema_digest",
    "stored_answer",
    "supports_form",
    "supports_url",
    "url_input_request",
]

#: Protocol revisions whose ``elicitation/create`` carries ``mode`` (SEP-1036); older ones have no modes.
FIRST_REVISION_WITH_MODES = "2025-11-25"
#: Protocol revisions that know URL mode (SEP-1036 is part of 2025-11-25).
FIRST_REVISION_WITH_URL_MODE = "2025-11-25"
#: JSON-RPC ids of ``elicitation/create`` requests this app sends: ``"elicitation-<elicitation_id>"``.
REQUEST_ID_PREFIX = "elicitation-"


def supports_form(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether client ``capabilities`` (``initialize``, or a 2026-07-28 request's ``_meta``) allow
    form-mode elicitation.

    MCP 2025-11-25 / SEP-1036 "Capabilities": ``"elicitation": {}`` means form only
    (the 2025-06-18 declaration), ``{"form": {}, ...}`` declares form mode;
    ``{"url": {}}`` alone, or no ``elicitation``, does not allow forms.
    """
    if not isinstance(capabilities, Mapping):
        return False
    declared = capabilities.get("elicitation")
    if not isinstance(declared, Mapping):
        return False
    return not declared or isinstance(declared.get("form"), Mapping)


def supports_url(capabilities: Mapping[str, Any] | None, protocol_version: str | None = None) -> bool:
    """Whether a client may receive URL-mode elicitation (``-32042`` or a URL input request).

    SEP-1036 "Capabilities": only ``"elicitation": {"url": {}, …}`` declares URL mode;
    ``"elicitation": {}`` is form only; a revision older than 2025-11-25 has no URL mode.
    """
    if protocol_version is not None and str(protocol_version) < FIRST_REVISION_WITH_URL_MODE:
        return False
    if not isinstance(capabilities, Mapping):
        return False
    declared = capabilities.get("elicitation")
    return isinstance(declared, Mapping) and isinstance(declared.get("url"), Mapping)


def describe(elicitation: Elicitation) -> dict[str, str]:
    """A 2025-11-25 URL-mode elicitation as the client sees it: ``{mode, elicitationId, url, message}``."""
    return {
        "mode": "url",
        "elicitationId": elicitation.elicitation_id,
        "url": elicitation.url,
        "message": elicitation.message,
    }


def form_params(message: str, schema: dict[str, Any], protocol_version: str) -> dict[str, Any]:
    """``elicitation/create`` params of a form (no ``mode`` before 2025-11-25)."""
    params: dict[str, Any] = {"mode": "form", "message": message, "requestedSchema": schema}
    if str(protocol_version) < FIRST_REVISION_WITH_MODES:
        del params["mode"]
    return params


def form_input_request(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 ``inputRequests`` entry asking for a form."""
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def url_input_request(elicitation: Elicitation) -> dict[str, Any]:
    """A 2026-07-28 ``inputRequests`` entry sending the user to the elicitation's page (no
    ``elicitationId``: the server learns the outcome from its own row, named in ``requestState``)."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": elicitation.message, "url": elicitation.url},
    }


def schema_digest(schema: Mapping[str, Any]) -> str:
    """Short SHA-256 of a schema's canonical JSON (binds an answer to the form that was asked)."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class UrlElicitationRequired(McpError):
    """JSON-RPC error ``-32042`` (SEP-1036 "URL Elicitation Required"): raise it from a tool to end
    the call and hand the client the links it must open before retrying (2025-11-25 sessions).

    ``data`` is ``{"elicitations": [{"mode": "url", "elicitationId", "url", "message"}, …]}``.
    Only raise it for a client that :func:`supports_url` (the helpers of :mod:`elicitation.api` check).
    """

    def __init__(
        self, elicitations: Sequence[Elicitation], message: str = "This request requires more information."
    ) -> None:
        if not elicitations:
            raise ValueError("UrlElicitationRequired needs at least one elicitation")
        self.elicitations = list(elicitations)
        super().__init__(URL_ELICITATION_REQUIRED, message, {"elicitations": [describe(e) for e in elicitations]})


def stored_answer(pk: int):
    """A ``poll`` for :meth:`ToolContext.send_request`: the answer another worker stored on the row."""

    async def poll() -> dict[str, Any] | None:
        answer = await Elicitation.objects.filter(pk=pk).values_list("client_answer", flat=True).afirst()
        return answer if isinstance(answer, dict) else None

    return poll
