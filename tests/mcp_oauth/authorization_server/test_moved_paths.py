"""Old module paths that sites name in settings keep working for now, with a DeprecationWarning (issue 29)."""

from __future__ import annotations

import importlib
import sys

import pytest
from django.contrib.auth.hashers import get_hashers_by_algorithm

from mcp_oauth.authorization_server.client_auth import client_secrets
from mcp_oauth.authorization_server.client_registry import registration, trust
from mcp_oauth.checks import check_fast_client_secret_hasher
from mcp_oauth.settings import CLIENT_SECRET_HASHER_PATHS, client_secret_hasher_listed

OLD = "mcp_oauth.authorization_server"


def _import_old(name: str):
    sys.modules.pop(f"{OLD}.{name}", None)
    with pytest.warns(DeprecationWarning, match=rf"{OLD}\.{name} moved to "):
        return importlib.import_module(f"{OLD}.{name}")


@pytest.mark.parametrize(
    ("name", "attribute", "new"),
    [
        ("client_secrets", "ClientSecretHasher", client_secrets),
        ("trust", "TrustPolicyCIMDPermission", trust),
        ("trust", "TrustPolicyDCRPermission", trust),
        ("registration", "AnonymousPublicClientPermission", registration),
    ],
)
def test_an_old_settings_path_imports_the_same_class_and_warns(name, attribute, new):
    old = _import_old(name)
    assert getattr(old, attribute) is getattr(new, attribute)


def test_the_old_hasher_path_in_password_hashers_still_verifies_and_counts_as_listed(settings):
    old_path = f"{OLD}.client_secrets.ClientSecretHasher"
    assert old_path in CLIENT_SECRET_HASHER_PATHS
    _import_old("client_secrets")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher", old_path]
    hasher = get_hashers_by_algorithm()[client_secrets.ALGORITHM]
    encoded = hasher.encode("s3cr3t-client-secret", hasher.salt())
    assert hasher.verify("s3cr3t-client-secret", encoded) and not hasher.verify("wrong", encoded)
    assert client_secret_hasher_listed()
    assert check_fast_client_secret_hasher(None) == []  # no W051: the old path is still the fast hasher
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    assert not client_secret_hasher_listed()
