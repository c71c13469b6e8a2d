"""Address vetting of CIMD fetches (mcp_oauth.authorization_server.cimd.addresses): non-public addresses refused, public accepted, IPv4-mapped addresses mapped, the test setting allows loopback only."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.cimd.addresses import vet_address
from mcp_oauth.authorization_server.cimd.errors import AddressRefused

REFUSED_ADDRESSES = [
    "127.0.0.1",
    "127.255.255.254",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "100.100.100.200",
    "192.0.0.192",
    "198.18.0.1",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fe80::1%1",
    "fc00::1",
    "fd00:ec2::254",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "64:ff9b::808:808",
    "2002:7f00:1::",
    "2002:a9fe:a9fe::",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "::7f00:1",
    "::127.0.0.1",
    "fec0::1",
    "ff02::1",
    "2001:db8::1",
    "not-an-address",
]


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_vet_refuses_non_public_addresses(address):
    with pytest.raises(AddressRefused) as info:
        vet_address(address)
    assert info.value.detail == {"address": address}


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"])
def test_vet_accepts_public_addresses(address):
    assert vet_address(address) == address


def test_vet_maps_ipv4_mapped_public_address_to_ipv4():
    assert vet_address("::ffff:8.8.8.8") == "8.8.8.8"


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"])
def test_test_setting_allows_loopback_only(address):
    assert vet_address(address, allow_loopback=True) in ("127.0.0.1", "127.0.0.2", "::1")


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.0.1", "169.254.169.254", "fe80::1", "::"])
def test_test_setting_still_refuses_everything_else(address):
    with pytest.raises(AddressRefused):
        vet_address(address, allow_loopback=True)
