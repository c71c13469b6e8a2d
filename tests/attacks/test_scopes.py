"""Attack/review of the scope fast path added with commit 03e5ea4 (mcp_oauth.shared.scopes.missing: when
every needed scope is granted literally, the hierarchy is not expanded). Held: the answer is the
old one (hierarchy expansion) for every input shape, hierarchy, cycles, duplicates, iterators."""

from __future__ import annotations

import itertools
import random

import pytest

from mcp_oauth.shared import scopes


def old_missing(granted, needed):
    have = scopes.implied(granted)
    return [scope for scope in dict.fromkeys(needed) if scope not in have]


HIERARCHIES = [
    {},
    {"mcp:admin": ["mcp"]},
    {"a": ["b"], "b": ["c"], "c": ["a"]},  # a cycle
    {"root": ["a", "b"], "a": ["mcp"], "b": ["profile"]},
]
NAMES = ["mcp", "mcp:admin", "profile", "a", "b", "c", "root", "offline_access", ""]


@pytest.mark.parametrize("hierarchy", HIERARCHIES)
def test_fast_path_answers_what_the_hierarchy_answers(settings, hierarchy):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SCOPE_HIERARCHY": hierarchy}
    rnd = random.Random(7)
    for _ in range(400):
        granted = rnd.sample(NAMES, rnd.randrange(0, 4))
        needed = [rnd.choice(NAMES) for _ in range(rnd.randrange(0, 4))]
        expected = old_missing(list(granted), list(needed))
        for shape in (list, set, frozenset, tuple, iter):
            assert scopes.missing(shape(granted), iter(needed)) == expected, (shape, granted, needed)
            assert scopes.missing(shape(granted), list(needed)) == expected


def test_a_string_of_scopes_is_not_read_as_a_set_of_scopes():
    """A caller passing the token's scope string instead of its split: nothing is granted by
    accident (characters, as before the fast path)."""
    assert scopes.missing("mcp", ["mcp"]) == old_missing("mcp", ["mcp"]) == ["mcp"]
    assert scopes.missing("m c p", ["m"]) == old_missing("m c p", ["m"])


def test_duplicates_in_needed_are_reported_once():
    assert scopes.missing({"x"}, ["mcp", "mcp", "profile"]) == ["mcp", "profile"]
    assert list(itertools.islice(scopes.missing(set(), ["a"] * 3), 5)) == ["a"]
