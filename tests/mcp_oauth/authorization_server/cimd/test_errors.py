"""Why a client ID metadata document was refused (mcp_oauth.authorization_server.cimd.errors): each
refusal carries the OAuth error the endpoints answer, a stable reason and its audit kind."""

from __future__ import annotations

import pytest
from oauth2_provider.cimd import CIMDError

from mcp_oauth.authorization_server.cimd.errors import (
    AddressRefused,
    CIMDRefused,
    FetchFailed,
    InvalidClientIdURL,
    InvalidDocument,
    NotPermitted,
    Unavailable,
)


@pytest.mark.parametrize(
    ("cls", "error", "reason", "audit_kind"),
    [
        (CIMDRefused, "invalid_client", "refused", "cimd.fetch_failed"),
        (InvalidClientIdURL, "invalid_request", "invalid_url", None),
        (AddressRefused, "invalid_client", "address_refused", "cimd.ssrf_refused"),
        (FetchFailed, "invalid_client", "fetch_failed", "cimd.fetch_failed"),
        (InvalidDocument, "invalid_client", "invalid_document", "cimd.fetch_failed"),
        (NotPermitted, "invalid_client", "not_permitted", None),
        (Unavailable, "temporarily_unavailable", "wait_timeout", None),
    ],
)
def test_each_refusal_names_its_error_reason_and_audit_kind(cls, error, reason, audit_kind):
    refusal = cls("The client metadata document could not be used.")
    assert isinstance(refusal, CIMDRefused) and isinstance(refusal, CIMDError)
    assert (refusal.error, refusal.reason, refusal.audit_kind) == (error, reason, audit_kind)
    assert str(refusal) == "The client metadata document could not be used."
    assert refusal.detail == {}


def test_reason_and_detail_given_per_instance_stay_on_the_instance():
    detail = {"status": 404}
    refusal = FetchFailed("The document answered 404.", reason="http_status", detail=detail)
    assert refusal.reason == "http_status"
    assert refusal.detail == {"status": 404}
    detail["status"] = 500  # a copy was kept
    assert refusal.detail == {"status": 404}
    assert FetchFailed("again").reason == "fetch_failed"  # the class default is untouched
