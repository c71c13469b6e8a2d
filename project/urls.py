import functools

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import TemplateView

from mcp_oauth.authorization_server.views import UI_SECURITY_HEADERS

from . import api


def not_frameable(view):
    """The login page carries the whole authorization request in ``next``: same headers as the consent page."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        for header, value in UI_SECURITY_HEADERS.items():
            response[header] = value
        return response

    return wrapper


urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
    path("accounts/login/", not_frameable(auth_views.LoginView.as_view()), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/profile", api.profile, name="api-profile"),
    path("elicitation/", include("elicitation.urls")),
    path("", include("mcp_oauth.urls")),
]
