# placeholder; being written
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def mcp_endpoint(request):
    return HttpResponse(status=501)
