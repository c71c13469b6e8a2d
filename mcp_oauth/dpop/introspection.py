"""DPoP in the RFC 7662 introspection response (RFC 9449 §6.2): an active DPoP-bound token is
described with ``"token_type": "DPoP"`` and ``"cnf": {"jkt": "<thumbprint>"}``, so a resource
server deployed apart from this authorization server can check the proof's key. A token issued by
token exchange for another resource is described with its actor, ``"act"`` (RFC 8693 §4.1)."""

from __future__ import annotations

import hashlib
import json

from django.http import HttpResponse, JsonResponse

from mcp_oauth.models import DPoPBinding, TokenActor

__all__ = ["with_confirmation"]


def with_confirmation(response: HttpResponse, token_value: str | None) -> HttpResponse:
    """``response`` (DOT's introspection answer for ``token_value``) with ``cnf.jkt`` and
    ``token_type`` added when the token is active and DPoP-bound; otherwise unchanged."""
    if token_value is None or response.status_code != 200:
        return response
    data = json.loads(response.content)
    if data.get("active") is not True:
        return response
    checksum = hashlib.sha256(token_value.encode("utf-8")).hexdigest()
    act = TokenActor.objects.filter(token_checksum=checksum).values_list("act", flat=True).first()
    if act is not None:  # RFC 8693 §4.1, RFC 7662 §2.2: the actor of an exchanged token
        data = {**data, "act": act}
    jkt = (
        DPoPBinding.objects.filter(token_checksum=checksum, token_kind=DPoPBinding.Kind.ACCESS_TOKEN)
        .values_list("jkt", flat=True)
        .first()
    )
    if jkt is None:
        return response if act is None else JsonResponse(data, status=response.status_code)
    return JsonResponse({**data, "token_type": "DPoP", "cnf": {"jkt": jkt}}, status=response.status_code)
