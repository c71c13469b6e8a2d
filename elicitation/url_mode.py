"""URL-mode elicitation names in one place (SEP-1036; MCP 2025-11-25 / 2026-07-28 "Elicitation" / "URL Mode").

The code lives in three modules with one job each; this module re-exports their URL-mode names
(``from elicitation.url_mode import require_connection``; it was ``elicitation.url`` before, a name
too close to the URLconf ``elicitation.urls``):

* :mod:`elicitation.service` — the domain: create, find, finish and complete elicitation rows
  (:func:`create_url_elicitation`, :func:`complete_elicitation` for a site's own views and webhooks);
* :mod:`elicitation.api` — what tools call: :func:`require_connection`, :func:`require_secret`,
  :func:`elicit_url` (one tool body, both protocol eras);
* :mod:`elicitation.protocol` — capability checks and wire shapes (:func:`supports_url`,
  :class:`UrlElicitationRequired` = JSON-RPC ``-32042``).
"""

from __future__ import annotations

from elicitation.api import (
    ConnectedAccount,
    UrlElicitationUnsupported,
    UrlResult,
    elicit_url,
    require_connection,
    require_secret,
)
from elicitation.protocol import (
    FIRST_REVISION_WITH_URL_MODE,
    REQUEST_ID_PREFIX,
    URL_ELICITATION_REQUIRED,
    UrlElicitationRequired,
    describe,
    supports_url,
)
from elicitation.service import complete_elicitation, create_url_elicitation, finish_elicitation, get_secret

__all__ = [
    "FIRST_REVISION_WITH_URL_MODE",
    "REQUEST_ID_PREFIX",
    "URL_ELICITATION_REQUIRED",
    "ConnectedAccount",
    "UrlElicitationRequired",
    "UrlElicitationUnsupported",
    "UrlResult",
    "complete_elicitation",
    "create_url_elicitation",
    "describe",
    "elicit_url",
    "finish_elicitation",
    "get_secret",
    "require_connection",
    "require_secret",
    "supports_url",
]
