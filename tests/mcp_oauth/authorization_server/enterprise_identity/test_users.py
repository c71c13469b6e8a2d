"""User mapping of Enterprise-Managed Authorization (mcp_oauth.authorization_server.enterprise_identity.users): match_email links a verified address once, create makes a user without a password, an inactive linked user is refused."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import (
    AuditEvent,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
)
from tests.mcp_oauth.authorization_server.enterprise_identity.test_jwt_bearer import (  # noqa: F401 - fixtures
    IDP,
    ISSUER,
    JWT_BEARER,
    TYP,
    assert_error,
    chat_client,
    id_jag,
    idp_key,
    provider,
    redeem,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures


@pytest.mark.django_db
def test_match_email_policy_links_a_verified_address_once(client, provider, chat_client, idp_key, resource, user):
    app, secret = chat_client
    provider.user_policy = EnterpriseIdentityProvider.UserPolicy.MATCH_EMAIL
    provider.save()
    unverified = id_jag(idp_key, app, resource.uri, sub="U2", email=user.email)
    assert_error(redeem(client, app, secret, unverified), "invalid_grant")
    verified = id_jag(idp_key, app, resource.uri, sub="U2", email=user.email.upper(), email_verified=True)
    assert redeem(client, app, secret, verified).status_code == 200
    assert EnterpriseIdentity.objects.get(provider=provider, subject="U2").user == user
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ENTERPRISE_IDENTITY_LINKED).count() == 1


@pytest.mark.django_db
def test_create_policy_creates_a_user_without_password(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    provider.user_policy = EnterpriseIdentityProvider.UserPolicy.CREATE
    provider.save()
    assertion = id_jag(idp_key, app, resource.uri, sub="U3", email="carol@acme.example", email_verified=True)
    assert redeem(client, app, secret, assertion).status_code == 200
    created = get_user_model().objects.get(username="carol@acme.example")
    assert not created.has_usable_password()
    assert get_access_token_model().objects.get().user == created


@pytest.mark.django_db
def test_inactive_linked_user_is_refused(client, provider, chat_client, idp_key, resource, user):
    app, secret = chat_client
    user.is_active = False
    user.save()
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "invalid_grant")
