"""Canonical resource URIs (mcp_oauth.shared.resource_uris, RFC 8707 §2, MCP "Canonical Server URI")."""

from __future__ import annotations

import pytest

from mcp_oauth.shared.resource_uris import InvalidResource, canonicalize_resource, resource_path


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("HTTPS://Example.COM:443/mcp/", "https://example.com/mcp"),
        ("https://example.com/mcp", "https://example.com/mcp"),
        ("http://LOCALHOST:80/mcp", "http://localhost/mcp"),
        ("http://127.0.0.1:8000/mcp/", "http://127.0.0.1:8000/mcp"),
        ("https://example.com:8443", "https://example.com:8443"),
        ("https://example.com/", "https://example.com"),
        ("https://[::1]:443/mcp", "https://[::1]/mcp"),
        ("https://example.com/MCP?tenant=A", "https://example.com/MCP?tenant=A"),  # path and query keep their case
    ],
)
def test_spellings_canonicalise_to_one_string(uri, canonical):
    assert canonicalize_resource(uri) == canonical


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (None, "a resource must be an absolute https URI"),
        (b"https://example.com", "a resource must be an absolute https URI"),
        ("", "a resource must be an absolute https URI"),
        ("https://example.com/ mcp", "a resource must be an absolute https URI"),
        ("https://example.com/\x7f", "a resource must be an absolute https URI"),
        ("https://example.com/mcp#top", "a resource indicator must not include a fragment (RFC 8707 §2)"),
        ("ftp://example.com/mcp", "a resource must use the https (or loopback http) scheme"),
        ("urn:example:mcp", "a resource must use the https (or loopback http) scheme"),
        ("https://user:pw@example.com/mcp", "a resource URI must not carry userinfo"),
        ("https:///mcp", "a resource URI must have a host"),
    ],
)
def test_invalid_resources_are_refused_with_the_reason(uri, message):
    with pytest.raises(InvalidResource) as raised:
        canonicalize_resource(uri)
    assert str(raised.value) == message


def test_an_invalid_port_is_refused():
    with pytest.raises(InvalidResource, match="^invalid resource URI: "):
        canonicalize_resource("https://example.com:99999/mcp")


def test_resource_path():
    assert resource_path("https://example.com/mcp") == "/mcp"
    assert resource_path("https://example.com") == ""
    assert resource_path("https://example.com:8443/a/b?x=1") == "/a/b"
