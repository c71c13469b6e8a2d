from django.apps import AppConfig
from django.db.models.signals import post_migrate

#: Path of the reference site's JSON API (a protected resource of its own, scope ``profile``).
API_PATH = "/api"


def ensure_api_resource(**kwargs):
    """Register ``BASE_URL + /api`` as a protected resource (scope ``profile``); return it.

    Tokens for ``/api/profile`` are asked with ``resource=<site>/api`` (RFC 8707): the MCP
    endpoint's tokens are not accepted there, and the other way round.
    """
    from mcp_oauth.models import ProtectedResource
    from mcp_oauth.settings import mcp_oauth_settings
    from mcp_oauth.shared.resource_uris import canonicalize_resource

    if not mcp_oauth_settings.BASE_URL:
        return None
    uri = canonicalize_resource(mcp_oauth_settings.absolute(API_PATH))
    resource, _ = ProtectedResource.objects.get_or_create(
        uri=uri, defaults={"name": "Reference site API", "scopes": "profile"}
    )
    return resource


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "Reference site"

    def ready(self) -> None:
        from django.apps import apps

        # Listen to the app that owns ProtectedResource: its table exists once it has migrated
        # (sender=self did not fire while this app had no models: /api stayed unregistered).
        post_migrate.connect(
            ensure_api_resource, sender=apps.get_app_config("mcp_oauth"), dispatch_uid="project.ensure_api_resource"
        )
