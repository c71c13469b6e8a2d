"""completion/complete (mcp_oauth.mcp_server.registry.completions): at most 100 values with total and hasMore."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.registry.completions import to_completion


def test_completion_caps_values_at_100_with_total_and_has_more():
    completion = to_completion([str(i) for i in range(150)])
    assert len(completion.values) == 100 and completion.total == 150 and completion.has_more is True
    small = to_completion(["a"])
    assert small.values == ["a"] and small.total == 1 and small.has_more is False
    with pytest.raises(TypeError):
        to_completion("abc")
    with pytest.raises(TypeError):
        to_completion([1, 2])
