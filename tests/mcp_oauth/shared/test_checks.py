"""The shared system checks (mcp_oauth.shared.checks): ``BASE_URL`` and ``ISSUER`` (E001, W002,
E003) and the number rule the other floors' checks use."""

from __future__ import annotations

import pytest

from mcp_oauth.shared.checks import check_base_url, is_number


def ids(settings, **overrides):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    return [message.id for message in check_base_url(None)]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"BASE_URL": "https://mcp.example.com"}, []),
        ({"BASE_URL": "http://localhost:8000"}, []),
        ({"BASE_URL": "http://127.0.0.1:8000"}, []),
        ({"BASE_URL": None}, ["mcp_oauth.E001"]),
        ({"BASE_URL": "mcp.example.com"}, ["mcp_oauth.E001"]),
        ({"BASE_URL": "https://mcp.example.com/?a=1"}, ["mcp_oauth.E001"]),
        ({"BASE_URL": "ftp://mcp.example.com"}, ["mcp_oauth.E001"]),
        ({"BASE_URL": "http://mcp.example.com"}, ["mcp_oauth.W002"]),
        ({"BASE_URL": "https://mcp.example.com", "ISSUER": "https://mcp.example.com/tenant/"}, ["mcp_oauth.E003"]),
        ({"BASE_URL": "https://mcp.example.com", "ISSUER": "https://mcp.example.com/tenant"}, []),
    ],
)
def test_base_url_and_issuer(settings, overrides, expected):
    assert ids(settings, **overrides) == expected


@pytest.mark.parametrize(
    ("value", "minimum", "above", "expected"),
    [
        (0, 0, False, True),
        (0.5, 0, False, True),
        (0, 0, True, False),
        (-1, 0, False, False),
        (True, 0, False, False),
        ("1", 0, False, False),
        (None, 0, False, False),
    ],
)
def test_is_number(value, minimum, above, expected):
    assert is_number(value, minimum, above) is expected
