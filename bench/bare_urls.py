"""One async Django JSON view answering a JSON-RPC-shaped echo: the Django request-cycle floor."""

import json

from django.http import HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
async def echo(request):
    message = json.loads(request.body)
    text = message["params"]["arguments"]["text"]
    result = {
        "jsonrpc": "2.0",
        "id": message["id"],
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }
    return HttpResponse(json.dumps(result), content_type="application/json")


urlpatterns = [path("mcp", echo)]
