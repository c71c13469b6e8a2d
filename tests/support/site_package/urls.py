"""The fixture project package's URLconf (``ROOT_URLCONF = "tests.support.site_package.urls"``)."""

from django.urls import include, path

urlpatterns = [path("", include("mcp_oauth.urls"))]
