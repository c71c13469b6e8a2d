"""CIMD rules without I/O: client_id URLs (draft §3), documents (§4.1), redirect URIs, address vetting, cache lifetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from mcp_oauth.authorization_server.cimd.errors import AddressRefused, InvalidClientIdURL, InvalidDocument
from mcp_oauth.authorization_server.cimd.fetcher import freshness_lifetime
from mcp_oauth.authorization_server.cimd.metadata_document import (
    redirect_uri_allowed,
    validate_client_id_url,
    validate_document,
)
from tests.support.https_server import with_members

CID = "https://client.example.com/oauth/metadata.json"


def doc(**members):
    return with_members(
        {"client_id": CID, "client_name": "Example", "redirect_uris": ["http://127.0.0.1/callback"]}, **members
    )


# --- client_id URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://client.example.com/metadata.json",
        "https://client.example.com:8443/a/b/metadata.json",
        "https://client.example.com/metadata?tenant=1",  # a query is allowed (draft §3: SHOULD NOT)
        "https://xn--bcher-kva.example/m.json",
        "https://Client.Example.com/m.json",
    ],
)
def test_acceptable_client_id_urls(url):
    assert validate_client_id_url(url).scheme == "https"


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://client.example.com/m.json", "https"),
        ("HTTPS://client.example.com/m.json", "https"),
        ("Https://client.example.com/m.json", "https"),
        ("https://client.example.com", "path"),
        ("https://client.example.com/", "path"),
        ("https://client.example.com/./m.json", "dot segments"),
        ("https://client.example.com/a/../m.json", "dot segments"),
        ("https://client.example.com/a/%2e%2e/m.json", "dot segments"),
        ("https://client.example.com/a/%2E/m.json", "dot segments"),
        ("https://client.example.com/a%2fb/m.json", "encoded slashes"),
        ("https://client.example.com/m.json#frag", "fragment"),
        ("https://user@client.example.com/m.json", "user name"),
        ("https://user:pw@client.example.com/m.json", "user name"),
        ("https://client.example.com:99999/m.json", "port"),
        ("https://client.example.com:0/m.json", "port"),
        ("https://client.example.com/m json", "printable"),
        ("https://client.example.com/m\tjson", "printable"),
        (" https://client.example.com/m.json", "printable"),
        ("https://client.example.com\\@evil.example/m.json", "printable"),
        ("https://exämple.com/m.json", "printable"),
        ("https://client.example.com/%00/m.json", "control"),
        ("https://client.example.com/" + "a" * 300, "longer"),
        ("https://bad_host!.example/m.json", "DNS name"),
        ("https:///m.json", "host"),
        ("https://8.8.8.8/m.json", "IP address"),
        ("", "https"),
    ],
)
def test_refused_client_id_urls(url, why):
    with pytest.raises(InvalidClientIdURL) as info:
        validate_client_id_url(url)
    assert info.value.error == "invalid_request"
    assert why in str(info.value)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.1",
        "0x7f.1",
        "0.0.0.0",
        "0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "[fe80::1]",
        "[fd00:ec2::254]",
        "[64:ff9b::a9fe:a9fe]",
        "[::]",
    ],
)
def test_non_public_ip_literal_hosts_are_ssrf_refusals(host):
    with pytest.raises(AddressRefused) as info:
        validate_client_id_url(f"https://{host}/m.json")
    assert info.value.error == "invalid_client"
    assert info.value.audit_kind == "cimd.ssrf_refused"


# --- documents --------------------------------------------------------------------------------


def test_valid_document_passes_unchanged():
    document = doc(
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        logo_uri="https://client.example.com/logo.png",
        jwks={"keys": [{"kty": "EC", "crv": "P-256", "x": "x", "y": "y"}]},
        redirect_uris=["https://client.example.com/cb", "http://localhost:3000/cb", "http://[::1]/cb"],
    )
    assert validate_document(document, CID) == document


@pytest.mark.parametrize(
    "document, reason",
    [
        ([], "not_object"),
        ("https://client.example.com/oauth/metadata.json", "not_object"),
        (doc(client_id=CID + "/"), "client_id_mismatch"),
        (doc(client_id=CID.replace("example.com", "example.com:443")), "client_id_mismatch"),
        (doc(client_id=CID.replace("client", "Client", 1)), "client_id_mismatch"),
        (doc(client_id=None), "missing_member"),
        (doc(client_name=None), "missing_member"),
        (doc(redirect_uris=None), "missing_member"),
        (doc(client_secret=""), "forbidden_member"),
        (doc(client_secret="s3cret"), "forbidden_member"),
        (doc(client_secret_expires_at=0), "forbidden_member"),
        (doc(token_endpoint_auth_method="client_secret_basic"), "auth_method"),
        (doc(token_endpoint_auth_method="client_secret_post"), "auth_method"),
        (doc(token_endpoint_auth_method="client_secret_jwt"), "auth_method"),
        (doc(token_endpoint_auth_method="private_key_jwt"), "auth_method"),
        (doc(token_endpoint_auth_method="tls_client_auth"), "auth_method"),
        (doc(jwks={"keys": [{"kty": "EC", "crv": "P-256", "x": "x", "y": "y", "d": "private"}]}), "jwks"),
        (doc(jwks={"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}), "jwks"),
        (doc(jwks="nope"), "jwks"),
        (doc(client_name=""), "client_name"),
        (doc(client_name=42), "client_name"),
        (doc(client_name="x" * 256), "client_name"),
        (doc(client_name="evil\nname"), "client_name"),
        (doc(redirect_uris=[]), "redirect_uri"),
        (doc(redirect_uris="http://127.0.0.1/cb"), "redirect_uri"),
        (doc(redirect_uris=[42]), "redirect_uri"),
        (doc(redirect_uris=["javascript:alert(1)"]), "redirect_uri"),
        (doc(redirect_uris=["JavaScript:alert(1)"]), "redirect_uri"),
        (doc(redirect_uris=[" javascript:alert(1)"]), "redirect_uri"),
        (doc(redirect_uris=["data:text/html,hi"]), "redirect_uri"),
        (doc(redirect_uris=["http://evil.example/cb"]), "redirect_uri"),
        (doc(redirect_uris=["HTTPS://client.example.com/cb"]), "redirect_uri"),
        (doc(redirect_uris=["https://client.example.com/cb#frag"]), "redirect_uri"),
        (doc(redirect_uris=["https://user@client.example.com/cb"]), "redirect_uri"),
        (doc(redirect_uris=["com.example.app:/cb"]), "redirect_uri"),
        (doc(redirect_uris=["https://client.example.com/cb"] * 21), "redirect_uri"),
        (doc(grant_types=["client_credentials"]), "grant_types"),
        (doc(grant_types=["refresh_token"]), "grant_types"),
        (doc(response_types=["token"]), "response_types"),
        (doc(extra="a\x00b"), "text"),
        (doc(extra="\ud800"), "text"),
    ],
)
def test_invalid_documents(document, reason):
    with pytest.raises(InvalidDocument) as info:
        validate_document(document, CID)
    assert info.value.reason == reason
    assert info.value.error == "invalid_client"


@pytest.mark.parametrize(
    "requested, allowed",
    [
        ("http://127.0.0.1/callback", True),
        ("http://127.0.0.1:51234/callback", True),  # loopback: any port (RFC 8252 §7.3)
        ("http://127.0.0.1/callback/", False),
        ("http://127.0.0.1/Callback", False),
        ("http://127.0.0.1/callback?x=1", False),
        ("http://localhost/callback", False),
        ("https://client.example.com/cb", True),
        ("https://client.example.com:8443/cb", False),
        ("https://client.example.com/cb#x", False),
        ("https://evil.example/cb", False),
        ("https://client.example.com@evil.example/cb", False),
    ],
)
def test_redirect_uri_is_checked_against_the_document(requested, allowed):
    document = doc(redirect_uris=["http://127.0.0.1/callback", "https://client.example.com/cb"])
    assert redirect_uri_allowed(requested, document) is allowed


# --- cache lifetimes -------------------------------------------------------------------------------


@pytest.fixture
def bounds(settings):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_MIN_AGE_SECONDS": 60,
        "CIMD_METADATA_MAX_AGE_SECONDS": 7200,
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CIMD_DEFAULT_MAX_AGE_SECONDS": 900}


@pytest.mark.parametrize(
    "headers, lifetime",
    [
        ({"Cache-Control": "max-age=600"}, 600),
        ({"Cache-Control": "public, max-age=600, must-revalidate"}, 600),
        ({"Cache-Control": "max-age=600, s-maxage=1200"}, 1200),
        ({"Cache-Control": 'max-age="300"'}, 300),
        ({"Cache-Control": "max-age=5"}, 60),  # clamped up to the minimum
        ({"Cache-Control": "max-age=99999999"}, 7200),  # clamped down to the maximum
        ({"Cache-Control": "no-store"}, 60),
        ({"Cache-Control": "no-cache, max-age=600"}, 60),
        ({"Cache-Control": "max-age=600", "Age": "100"}, 500),
        ({"Cache-Control": "max-age=-5"}, 900),
        ({"Cache-Control": "max-age=abc"}, 900),
        ({"Cache-Control": "max-age=" + "9" * 5000}, 7200),  # past int()'s digit limit: the maximum, not a 500
        ({"Cache-Control": "max-age=600", "Age": "9" * 5000}, 60),
        ({"Cache-Control": "max-age=\u0661\u0662"}, 900),  # Arabic-Indic digits are no delta-seconds (RFC 9111 §1.2.2)
        ({}, 900),
    ],
)
def test_freshness_lifetime(bounds, headers, lifetime):
    assert freshness_lifetime(headers) == lifetime


def test_freshness_lifetime_from_expires(bounds):
    date = datetime(2026, 1, 1, tzinfo=UTC)
    headers = {
        "Date": format_datetime(date, usegmt=True),
        "Expires": format_datetime(date + timedelta(seconds=1800), usegmt=True),
    }
    assert freshness_lifetime(headers) == 1800
    assert freshness_lifetime({"Date": headers["Date"], "Expires": "0"}) == 60  # already expired: the minimum


# --- RFC 7591 leniency: what vendors ship -----------------------------------------------------

DESKTOP_CLIENT = {
    # shaped like the documents major desktop MCP clients publish
    "client_id": CID,
    "client_name": "Desktop Assistant",
    "client_uri": "https://client.example.com",
    "logo_uri": "https://client.example.com/logo.svg",
    "redirect_uris": ["http://127.0.0.1/callback", "http://localhost/callback"],
    "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
    "application_type": "native",
    "software_id": "com.example.desktop",
    "software_version": "1.4.2",
}


def test_desktop_client_document_is_accepted_without_the_unsupported_grant():
    accepted = validate_document(DESKTOP_CLIENT, CID)
    assert accepted["grant_types"] == ["authorization_code", "refresh_token"]
    assert {k: v for k, v in accepted.items() if k != "grant_types"} == {
        k: v for k, v in DESKTOP_CLIENT.items() if k != "grant_types"
    }
    assert DESKTOP_CLIENT["grant_types"][-1] == "urn:ietf:params:oauth:grant-type:device_code"  # input untouched


@pytest.mark.parametrize(
    "members, dropped",
    [
        ({"logo_uri": "data:image/png;base64,AAAA"}, "logo_uri"),
        ({"logo_uri": "http://client.example.com/logo.png"}, "logo_uri"),
        ({"logo_uri": {"x": 1}}, "logo_uri"),
        ({"client_uri": "not a url"}, "client_uri"),
        ({"tos_uri": "javascript:alert(1)"}, "tos_uri"),
        ({"scope": ["mcp"]}, "scope"),
        ({"application_type": "browser"}, "application_type"),
    ],
)
def test_unusable_optional_members_are_left_out(members, dropped):
    accepted = validate_document({**DESKTOP_CLIENT, **members}, CID)
    assert dropped not in accepted
    assert accepted["client_name"] == "Desktop Assistant"


def test_unsupported_response_types_are_left_out():
    accepted = validate_document({**DESKTOP_CLIENT, "response_types": ["code", "id_token", "token"]}, CID)
    assert accepted["response_types"] == ["code"]


@pytest.mark.parametrize(
    "members, reason",
    [
        ({"redirect_uris": ["http://evil.example/cb"]}, "redirect_uri"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "auth_method"),
        ({"client_id": CID + "/"}, "client_id_mismatch"),
        ({"grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]}, "grant_types"),
    ],
)
def test_unsafe_or_contradictory_vendor_documents_are_refused(members, reason):
    with pytest.raises(InvalidDocument) as info:
        validate_document({**DESKTOP_CLIENT, **members}, CID)
    assert info.value.reason == reason


@pytest.mark.parametrize("name", ["Evil\u202eelgooG", "Goo\u200bgle", "\u2066Google\u2069", "Google\u200f"])
def test_a_client_name_with_bidi_or_zero_width_characters_falls_back_to_the_host(name):
    accepted = validate_document(doc(client_name=name), CID)
    assert accepted["client_name"] == "client.example.com"
