"""URLconf for resource-server tests: the project's URLs plus views protected by our decorator and DRF class."""

from django.http import JsonResponse
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_oauth.resource_server.decorators import require_bearer
from mcp_oauth.resource_server.drf import HasResourceScopes, MCPBearerAuthentication


@require_bearer
def plain_view(request):
    return JsonResponse({"user": request.user.get_username(), "client": request.mcp_principal.client_id})


@require_bearer(scopes=["profile"])
async def scoped_async_view(request):
    return JsonResponse({"ok": True})


class NotesView(APIView):
    authentication_classes = [MCPBearerAuthentication]
    permission_classes = [HasResourceScopes]
    required_scopes = ["profile"]

    def get(self, request):
        return Response({"user": request.user.get_username()})


urlpatterns = [
    path("api/plain", plain_view),
    path("api/scoped", scoped_async_view),
    path("api/notes", NotesView.as_view()),
    path("", include("project.urls")),
]
