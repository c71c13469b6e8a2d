"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document-00), on top of DOT's support.

* :mod:`.fetcher` — the SSRF-safe fetcher (DOT's ``CIMD_METADATA_FETCHER``);
* :mod:`.addresses` — which IP addresses the fetcher may connect to;
* :mod:`.metadata_document` — client_id URL and document rules;
* :mod:`.cache` — the cache (:class:`~mcp_oauth.models.ClientMetadataDocument`), HTTP
  freshness, cross-process single-flight;
* :mod:`.leased_fetch` — one fetch under its lease, its outcome stored, the Application mirror;
* :mod:`.tasks` — the Celery fetch and refresh tasks;
* :mod:`.oauth2_validator` — the OAuth2 validator mixin that routes URL client_ids here and
  checks redirect URIs against the document;
* :mod:`.errors` — why a client was refused.
"""
