"""The SSRF-safe fetcher against a local HTTPS server signed by a test CA (everything on 127.0.0.1)."""

from __future__ import annotations

import gzip
import json

import pytest

from mcp_oauth.authorization_server.cimd.errors import AddressRefused, FetchFailed, InvalidDocument
from mcp_oauth.authorization_server.cimd.fetcher import SafeMetadataFetcher
from tests.support.https_server import canary, cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures


def fetch(url, **kwargs):
    return SafeMetadataFetcher().fetch_document(url, **kwargs)


def test_fetches_a_document_over_verified_tls(cimd_env):
    client_id = cimd_env.publish(max_age=600)
    result = fetch(client_id)
    assert result.status == 200
    assert result.document["client_id"] == client_id
    assert result.max_age == 600
    assert result.address == "127.0.0.1"
    (seen,) = cimd_env.server.fetches("/client.json")
    assert seen.headers["Host"] == f"client.cimd.test:{cimd_env.server.port}"
    assert seen.headers["Accept-Encoding"] == "identity"
    assert "application/json" in seen.headers["Accept"]
    # DOT's interface: (document, max_age)
    assert SafeMetadataFetcher().fetch(client_id) == (result.document, 600)


def test_resolves_once_and_connects_to_the_vetted_address(cimd_env):
    client_id = cimd_env.publish()
    # DNS rebinding: the first answer is vetted; any later lookup would say 10.0.0.1.
    cimd_env.dns.sequence["client.cimd.test"] = [["127.0.0.1"], ["10.0.0.1"], ["10.0.0.1"]]
    result = fetch(client_id)
    assert result.status == 200 and result.address == "127.0.0.1"
    assert cimd_env.dns.lookups == ["client.cimd.test"]
    assert cimd_env.guard.refused == []


def test_every_dns_answer_is_vetted(cimd_env):
    client_id = cimd_env.publish()
    cimd_env.dns.names["client.cimd.test"] = ["127.0.0.1", "10.0.0.1"]  # split answer: one bad one refuses the host
    with pytest.raises(AddressRefused) as info:
        fetch(client_id)
    assert info.value.detail == {"address": "10.0.0.1"}
    assert cimd_env.server.connections == 0


def test_loopback_is_refused_without_the_test_setting(cimd_env):
    cimd_env.allow_loopback(False)
    client_id = cimd_env.publish()
    with pytest.raises(AddressRefused):
        fetch(client_id)
    assert cimd_env.server.connections == 0 and cimd_env.guard.attempts == []


def test_conditional_request_gets_304(cimd_env):
    client_id = cimd_env.publish()
    cimd_env.server.routes["/client.json"].etag = '"v1"'
    first = fetch(client_id)
    assert first.etag == '"v1"'
    second = fetch(client_id, etag='"v1"', last_modified="Wed, 21 Oct 2015 07:28:00 GMT")
    assert second.status == 304 and second.document is None
    seen = cimd_env.server.fetches("/client.json")[-1]
    assert seen.headers["If-None-Match"] == '"v1"'
    assert seen.headers["If-Modified-Since"] == "Wed, 21 Oct 2015 07:28:00 GMT"


def test_304_to_an_unconditional_request_is_a_failure(cimd_env):
    cimd_env.server.serve("/client.json", status=304)
    with pytest.raises(FetchFailed) as info:
        fetch(cimd_env.url())
    assert info.value.reason == "redirect"  # a 3xx that is not an answer to our conditional request


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(cimd_env, canary, status):
    cimd_env.server.serve(
        "/client.json", status=status, headers={"Location": f"https://127.0.0.1:{canary.port}/client.json"}
    )
    with pytest.raises(FetchFailed) as info:
        fetch(cimd_env.url())
    assert info.value.reason == "redirect" and f"HTTP {status}" in str(info.value)
    assert canary.hits == 0
    assert len(cimd_env.server.fetches()) == 1


@pytest.mark.parametrize("status", [201, 204, 404, 410, 500, 503])
def test_status_other_than_200_is_refused(cimd_env, status):
    cimd_env.server.serve("/client.json", status=status, body={"client_id": cimd_env.url()})
    with pytest.raises(FetchFailed) as info:
        fetch(cimd_env.url())
    assert info.value.reason == "http_status" and info.value.detail == {"status": status}


@pytest.mark.parametrize(
    "content_type", ["text/html", "text/plain", "application/javascript", None, "application/json; charset=iso-8859-1"]
)
def test_media_type_must_be_json(cimd_env, content_type):
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", body=cimd_env.document(client_id), content_type=content_type)
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason in ("content_type", "charset")


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/client-metadata+json"])
def test_json_media_types_accepted(cimd_env, content_type):
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", body=cimd_env.document(client_id), content_type=content_type)
    assert fetch(client_id).status == 200


def test_gzip_bomb_is_refused_without_decompressing(cimd_env):
    client_id = cimd_env.url()
    bomb = gzip.compress(b" " * 10_000_000)
    cimd_env.server.serve("/client.json", body=bomb, headers={"Content-Encoding": "gzip"})
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason == "content_encoding"


@pytest.mark.parametrize("with_length", [True, False])
def test_body_over_the_size_cap_is_refused(cimd_env, settings, with_length):
    client_id = cimd_env.url()
    document = cimd_env.document(client_id, padding="x" * 6000)
    cimd_env.server.serve("/client.json", body=document, content_length=with_length)
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason == "too_large" and "5120 bytes" in str(info.value)


def test_body_at_the_size_cap_is_accepted(cimd_env):
    client_id = cimd_env.url()
    document = cimd_env.document(client_id, padding="")
    document["padding"] = "x" * (5120 - len(json.dumps(document).encode()))
    cimd_env.server.serve("/client.json", body=document, content_length=False)
    assert len(json.dumps(document).encode()) == 5120
    assert fetch(client_id).document == document


def test_slow_drip_body_hits_the_total_time_limit(cimd_env, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 0.5}
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", body=cimd_env.document(client_id), drip=0.1)
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason == "timeout"


def test_slow_response_hits_the_total_time_limit(cimd_env, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 0.5}
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", body=cimd_env.document(client_id), delay=5)
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason == "timeout"


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe{}", b"\xef\xbb\xbf{}", b'{"a": 1, "a": 2}', b'{"a": NaN}', b"[" * 3000, b"not json", b""],
)
def test_bodies_that_are_not_strict_utf8_json(cimd_env, body):
    cimd_env.server.serve("/client.json", body=body)
    with pytest.raises(InvalidDocument) as info:
        fetch(cimd_env.url())
    assert info.value.reason == "json"


@pytest.mark.parametrize("body", [b"[1, 2]", b'"https://client.cimd.test/client.json"', b"null", b"42"])
def test_json_that_is_not_an_object(cimd_env, body):
    cimd_env.server.serve("/client.json", body=body)
    with pytest.raises(InvalidDocument) as info:
        SafeMetadataFetcher().fetch(cimd_env.url())
    assert info.value.reason == "not_object"


def test_certificate_from_an_untrusted_ca_is_refused(cimd_env, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CIMD_CA_FILE": None}  # the system CAs do not know the test CA
    with pytest.raises(FetchFailed) as info:
        fetch(cimd_env.publish())
    assert info.value.reason == "tls"


def test_certificate_for_another_name_is_refused(cimd_env):
    cimd_env.dns.names["unlisted.cimd.test"] = ["127.0.0.1"]  # not in the certificate's names
    client_id = cimd_env.publish(host="unlisted.cimd.test")
    with pytest.raises(FetchFailed) as info:
        fetch(client_id)
    assert info.value.reason == "tls"


def test_proxy_environment_is_ignored(cimd_env, canary, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{canary.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert fetch(cimd_env.publish()).status == 200
    assert canary.hits == 0


def test_unresolvable_host(cimd_env):
    with pytest.raises(FetchFailed) as info:
        fetch("https://nowhere.cimd.test/client.json")
    assert info.value.reason == "dns"


def test_connection_refused(cimd_env, canary):
    port = canary.port
    canary.close()  # nothing listens there any more
    with pytest.raises(FetchFailed) as info:
        fetch(f"https://client.cimd.test:{port}/client.json")
    assert info.value.reason == "connect"


def test_fetcher_works_in_a_forked_child(cimd_env):
    """Prefork servers and Celery workers fork after the parent may have used the DNS lookup threads."""
    import multiprocessing

    client_id = cimd_env.publish()
    assert fetch(client_id).status == 200  # the parent's lookup threads exist now
    context = multiprocessing.get_context("fork")
    results = context.Queue()

    def child():
        try:
            results.put(fetch(client_id).status)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            results.put(repr(exc))

    process = context.Process(target=child)
    process.start()
    try:
        assert results.get(timeout=20) == 200
    finally:
        process.join(timeout=10)
