"""The package's version (mcp_oauth.__version__) is the distribution's, as pyproject.toml declares it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import mcp_oauth

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_the_distributions():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert mcp_oauth.__version__ == declared
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?", mcp_oauth.__version__)  # PEP 440, no local part
