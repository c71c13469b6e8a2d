"""Fixtures shared by the tests of the elicitation app."""

from tests.support.elicitation_keys import key  # noqa: F401 - a fixture
