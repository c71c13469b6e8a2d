"""A small bearer-protected JSON API of the reference site.

``GET /api/profile`` (scope ``profile``, tokens for the resource ``<site>/api``) answers the token's user: this is what the
``demo_profile`` tool of *another* site reads once its user connected this site as a
third-party provider (URL-mode elicitation). It is also the provider's "account endpoint"
that labels the connection.
"""

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from mcp_oauth.resource_server.challenges import challenge_response
from mcp_oauth.resource_server.decorators import require_bearer


@require_GET
@require_bearer(scopes=["profile"], resource="/api")
def profile(request):
    """``{"sub", "username", "email", "name", "date_joined"}`` of the token's user (``Cache-Control: no-store``).

    A token without a user (client credentials) gets 403 ``insufficient_scope`` with its bearer
    challenge (RFC 6750 §3.1): there is no profile.
    """
    user = request.mcp_principal.user
    if user is None:
        return challenge_response(
            request.mcp_principal.resource, 403, error="insufficient_scope", error_description="This token has no user."
        )
    response = JsonResponse(
        {
            "sub": str(user.pk),
            "username": user.get_username(),
            "email": user.email,
            "name": user.get_full_name() or user.get_username(),
            "date_joined": user.date_joined.isoformat(),
        }
    )
    response["Cache-Control"] = "no-store"
    return response
