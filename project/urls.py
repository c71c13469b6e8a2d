from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import TemplateView
from rest_framework.routers import SimpleRouter

from mcp_oauth.shared.ui_headers import secure_ui_view

from . import api

router = SimpleRouter()
router.register("notes", api.NoteViewSet, basename="notes")

urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
    # The login page carries the whole authorization request in ``next``: the consent page's headers.
    path("accounts/login/", secure_ui_view(auth_views.LoginView.as_view()), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/profile", api.profile, name="api-profile"),
    path("api/", include(router.urls)),
    path("elicitation/", include("elicitation.urls")),
    path("", include("mcp_oauth.urls")),
]
