"""The skill format (mcp_oauth.shared.skill_format): front matter read verbatim with the YAML 1.2 core
schema, the Agent Skills name and description rules, skill:// URIs split without normalisation,
file paths inside a skill, sha256: digests."""

from __future__ import annotations

import hashlib

import pytest

from mcp_oauth.shared.skill_format import (
    InvalidSkill,
    check_file_path,
    check_skill_path,
    digest,
    mime_type,
    parse_front_matter,
    skill_uri,
    split_uri,
)


def test_front_matter_is_verbatim_yaml_1_2():
    data = (
        b"\xef\xbb\xbf---\r\nname: pdf-processing\r\ndescription: Extract PDFs\r\nlicense: Apache-2.0\r\n"
        b"released: 2026-01-01\r\nenabled: yes\r\nstrict: true\r\nmode: 0o17\r\nmask: 0x1F\r\nlegacy: 017\r\n"
        b"ratio: 1.5\r\nnothing: ~\r\nmetadata:\r\n  version: '2.1'\r\n  tags: [a, b]\r\n---\r\n\r\n# Body\r\n---\r\n"
    )
    assert parse_front_matter(data) == {
        "name": "pdf-processing",
        "description": "Extract PDFs",
        "license": "Apache-2.0",
        "released": "2026-01-01",
        "enabled": "yes",
        "strict": True,
        "mode": 15,
        "mask": 31,
        "legacy": 17,
        "ratio": 1.5,
        "nothing": None,
        "metadata": {"version": "2.1", "tags": ["a", "b"]},
    }


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"# no front matter\n", "does not begin with"),
        (b"---\nname: x\ndescription: d\n", "does not begin with"),  # never closed
        (b"---\n- a\n---\n", "not a YAML mapping"),
        (b"---\nname: Bad_Name\ndescription: d\n---\n", "is not a skill name"),
        (b"---\nname: -bad\ndescription: d\n---\n", "is not a skill name"),
        (b"---\nname: a--b\ndescription: d\n---\n", "is not a skill name"),
        (b"---\nname: " + b"a" * 65 + b"\ndescription: d\n---\n", "is not a skill name"),
        (b"---\nname: ok\n---\n", "description must be"),
        (b"---\nname: ok\ndescription: '" + b"d" * 1025 + b"'\n---\n", "description must be"),
        (b"---\nname: ok\ndescription: d\nx: .nan\n---\n", "not a finite number"),
        (b"---\nname: ok\ndescription: d\n1: x\n---\n", "is not a string"),
        (b"---\nname: ok\ndescription: !!python/name:os.system\n---\n", "not valid YAML"),
        (b"---\nname: ok\ndescription: \xff\xfe\n---\n", "not UTF-8"),
        (b"---\nname: [unclosed\n---\n", "not valid YAML"),
    ],
)
def test_bad_front_matter_is_refused_with_the_reason(data, reason):
    with pytest.raises(InvalidSkill, match=reason):
        parse_front_matter(data)


@pytest.mark.parametrize(
    ("uri", "segments"),
    [
        ("skill://git-workflow/SKILL.md", ["git-workflow", "SKILL.md"]),
        ("skill://acme/billing/refunds/examples/email.md", ["acme", "billing", "refunds", "examples", "email.md"]),
        ("skill://x/../../settings.py", None),
        ("skill://x/./SKILL.md", None),
        ("skill://x//SKILL.md", None),
        ("skill://x/%2e%2e/SKILL.md", None),
        ("skill://x/SKILL.md?q", None),
        ("skill://x/a\\b", None),
        ("skill://", None),
        ("file:///etc/passwd", None),
    ],
)
def test_split_uri_never_normalises(uri, segments):
    assert split_uri(uri) == segments


def test_paths_uris_digests_and_types():
    assert check_skill_path("acme/billing/refunds") == "acme/billing/refunds"
    for bad in ("", "a/../b", "a//b", "a b", "a/%2e"):
        with pytest.raises(InvalidSkill):
            check_skill_path(bad)
    assert check_file_path("templates/regional/eu-invoice.md") == "templates/regional/eu-invoice.md"
    for bad in ("", "/abs", "a/../b", "a\\b", "./a", "a\x00b"):
        with pytest.raises(InvalidSkill):
            check_file_path(bad)
    assert skill_uri("acme/refunds") == "skill://acme/refunds/SKILL.md"
    assert skill_uri("acme/refunds", "") == "skill://acme/refunds"
    assert digest(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert digest(b"abc")[7:].islower() and len(digest(b"")) == 71
    assert (mime_type("SKILL.md"), mime_type("x.py"), mime_type("blob")) == (
        "text/markdown",
        "text/x-python",
        "application/octet-stream",
    )
