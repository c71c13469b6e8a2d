"""A site whose login page extends a base template it does not have (the old README's trap)."""

from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view(template_name="broken/login.html"), name="login"),
    path("", include("mcp_oauth.urls")),
]
