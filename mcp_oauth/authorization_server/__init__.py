"""The authorization-server side: django-oauth-toolkit configured as an MCP profile, plus its gaps filled.

In rooms by concern (docs/explanation/architecture.md): ``client_auth`` (client authentication),
``client_registry`` (registration, the client cache, trust), ``enterprise_identity`` (ID-JAG),
``organizations`` (the organization a request acts for, its client policy, its tokens),
``tokens`` (codes and refresh rotation), ``token_endpoint`` (DPoP, resource selection, guards),
``pages`` (authorize and consent, login, connected apps), ``user_data`` (export, erasure, the
user's life cycle), ``cimd``; the core beside them: ``server``, ``validator``, ``views``,
``metadata``, ``asgi`` and ``checks``.
"""
