"""Elicitation on the wire (elicitation.protocol): URL mode is supported only for a declared url capability on 2025-11-25."""

from __future__ import annotations

import pytest

from elicitation.url_mode import (
    supports_url,
)
from tests.elicitation.test_service import _url_elicitation_site  # noqa: F401 - fixtures


@pytest.mark.parametrize(
    ("capabilities", "protocol_version", "allowed"),
    [
        ({"elicitation": {}}, "2025-11-25", False),
        ({"elicitation": {"form": {}}}, "2025-11-25", False),
        ({"elicitation": {"url": {}}}, "2025-11-25", True),
        ({"elicitation": {"form": {}, "url": {}}}, "2025-11-25", True),
        ({}, "2025-11-25", False),
        ({"sampling": {}}, "2025-11-25", False),
        (None, "2025-11-25", False),
        ("elicitation", "2025-11-25", False),
        ({"elicitation": True}, "2025-11-25", False),
        ({"elicitation": {"url": True}}, "2025-11-25", False),
        ({"elicitation": {"url": {}}}, "2025-06-18", False),
        ({"elicitation": {"form": {}, "url": {}}}, "2025-03-26", False),
        ({"elicitation": {"url": {}}}, None, True),
    ],
)
def test_supports_url_only_for_a_declared_url_capability_on_2025_11_25(capabilities, protocol_version, allowed):
    assert supports_url(capabilities, protocol_version) is allowed
