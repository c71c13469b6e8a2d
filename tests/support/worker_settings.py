"""Settings of the worker processes that tests start (``DJANGO_SETTINGS_MODULE=tests.support.worker_settings``):
the reference site's settings, plus what a test sets through the environment.

* ``TEST_WORKER_MCP_OAUTH`` / ``TEST_WORKER_ELICITATION``: JSON objects merged over ``MCP_OAUTH`` /
  ``ELICITATION`` (e.g. short timeouts, a long safety poll).
"""

from __future__ import annotations

import json
import os

from project.settings import *  # noqa: F403 - the reference settings, then the test's overrides
from project.settings import ELICITATION, MCP_OAUTH

MCP_OAUTH = {**MCP_OAUTH, **json.loads(os.environ.get("TEST_WORKER_MCP_OAUTH") or "{}")}
ELICITATION = {**ELICITATION, **json.loads(os.environ.get("TEST_WORKER_ELICITATION") or "{}")}
