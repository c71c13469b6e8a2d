"""The defaults of the ``MCP_OAUTH`` settings namespace: every key the app reads, its default value
and what it means (the comments are the reference; docs/reference/settings.md states the same keys
with the same defaults, and a test checks that).

A foundation module with no import of the app: :mod:`mcp_oauth.settings` builds the settings
object on :data:`DEFAULTS` and re-exports both names (``mcp_oauth.settings.DEFAULTS``).
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    # Canonical scheme://host[:port] of the site as clients see it, without a
    # trailing slash, e.g. "https://mcp.example.com". Every absolute URL the app
    # publishes (issuer, endpoints, resource identifiers, challenges) is built
    # from it, never from the request's Host header (RFC 9700 §4.13).
    "BASE_URL": None,
    # RFC 8414 issuer identifier. None: BASE_URL. May carry a path
    # ("https://host/tenant"); never a trailing slash.
    "ISSUER": None,
    # Path of the default protected resource (the MCP endpoint), relative to BASE_URL.
    "MCP_PATH": "/mcp",
    # Human-readable name and required scopes of the default protected resource
    # (RFC 9728 resource_name; the scopes go into WWW-Authenticate challenges).
    "DEFAULT_RESOURCE_NAME": "MCP server",
    "DEFAULT_RESOURCE_SCOPES": ["mcp"],
    # Organizations (issue 31): each organization gets its own MCP endpoint at
    # MCP_PATH + "/o/<slug>" (a ProtectedResource row created with the organization and kept in
    # step with its slug and is_active; its own metadata, challenge and token audience).
    # False: no per-organization endpoint is created (the shared endpoint only).
    "ORGANIZATION_ENDPOINTS": True,
    # Development: when BASE_URL's host is localhost, 127.0.0.1 or [::1], the other two spellings
    # (same scheme and port) name the same site: metadata and challenges answer in the spelling
    # the client used, and its resource indicator binds the same resource (mcp_oauth.shared.origins).
    # No effect on a site whose BASE_URL is not a loopback origin.
    "LOOPBACK_ALIASES": True,
    # Extra origins (scheme://host[:port]) allowed to call the MCP endpoint from a
    # browser. The site's own origin is always allowed.
    "ALLOWED_ORIGINS": [],
    # Also allow loopback origins (http://localhost:*, http://127.0.0.1:*,
    # http://[::1]:*): a DNS-rebinding page never carries one of those.
    "ALLOW_LOOPBACK_ORIGINS": True,
    # Largest accepted MCP POST body, in bytes (larger: HTTP 413).
    "MAX_REQUEST_BYTES": 1024 * 1024,
    # An MCP session unused for this many seconds is gone (404 on its id).
    "SESSION_IDLE_TIMEOUT_SECONDS": 24 * 3600,
    # SSE: comment line sent this often to keep proxies from closing the stream (seconds).
    "SSE_KEEPALIVE_SECONDS": 15.0,
    # SSE GET stream: how often the session's outbox is read (seconds).
    "SSE_POLL_INTERVAL_SECONDS": 0.25,
    # serverInfo in the initialize result, and its instructions.
    "SERVER_NAME": "django-mcp-authz",
    "SERVER_VERSION": None,  # None: this package's version
    "INSTRUCTIONS": None,
    # Dotted path of the default ToolRegistry instance.
    "TOOL_REGISTRY": "mcp_oauth.mcp_server.tools.registry",
    # Module name looked for in every installed app at start-up (like admin.py),
    # so apps can register their tools there.
    "TOOLS_MODULE": "mcp_tools",
    # Dotted paths of the default ResourceRegistry and PromptRegistry (mcp_oauth.mcp_server.registry),
    # and the modules autodiscovered in every installed app to fill them.
    "RESOURCE_REGISTRY": "mcp_oauth.mcp_server.registry.resources.registry",
    "PROMPT_REGISTRY": "mcp_oauth.mcp_server.registry.prompts.registry",
    "RESOURCES_MODULE": "mcp_resources",
    "PROMPTS_MODULE": "mcp_prompts",
    # resources/list page size (entries); the cursor of the next page is opaque and signed.
    "RESOURCE_PAGE_SIZE": 50,
    # Largest resource content sent by resources/read (bytes of text as UTF-8, or of a blob
    # before base64); larger: JSON-RPC -32602 "Resource too large". Per item: max_bytes.
    # MCP Apps (extension io.modelcontextprotocol/ui): per ui:// resource URI, the origins its page
    # may reach, {"connectDomains": [...], "resourceDomains": [...], "frameDomains": [...],
    # "baseUriDomains": [...]} (origins only: "https://cdn.example.com", "https://*.example.com").
    # A key named here replaces the one the view declares (ui=AppView(csp=...)); [] removes it.
    "APPS_CSP": {},
    "RESOURCE_MAX_BYTES": 5 * 1024 * 1024,
    # --- skills (the Skills extension io.modelcontextprotocol/skills, docs/how-to/skills.md) ---
    # Folder looked for in every installed app (like templates/): <app>/mcp_skills/<skill>/SKILL.md.
    # None or "": no app folders.
    "SKILLS_DIR_NAME": "mcp_skills",
    # More skills roots (absolute paths), looked at before the apps' folders.
    "SKILL_DIRS": [],
    # skills/list and resources/directory/read page size (entries).
    "SKILLS_PAGE_SIZE": 50,
    # Per-skill limits (SEP-2640 "Limits"): a skill with more files, or more bytes in all, is not
    # served (system check mcp_oauth.W150); a file is never read past this size.
    "SKILL_MAX_FILES": 512,
    "SKILL_MAX_BYTES": 16 * 1024 * 1024,
    # Most resources/subscribe URIs one session may hold.
    "MAX_SUBSCRIPTIONS_PER_SESSION": 1000,
    # Anonymous RFC 7591 registration is open to public clients
    # (token_endpoint_auth_method "none"). True also lets anonymous callers
    # register confidential clients.
    "DCR_ALLOW_ANONYMOUS_CONFIDENTIAL": False,
    # How long a redeemed authorization code is remembered to detect its replay (seconds).
    "REDEEMED_CODE_RETENTION_SECONDS": 24 * 3600,
    # --- retention (mcp_oauth.retention, applied by mcp_oauth.tasks.cleanup in bounded batches; None: keep) ---
    # Audit events older than this are deleted (days).
    "AUDIT_RETENTION_DAYS": 365,
    # IP addresses of audit events older than this are cleared, the event kept (days).
    "AUDIT_IP_RETENTION_DAYS": 30,
    # Finished MCP tasks are deleted this long after they finished (days; a task's ttl may end it sooner).
    "TASK_RETENTION_DAYS": 30,
    # JWT assertion jti records are kept this long past the assertion's expiry (seconds).
    "USED_ASSERTION_RETENTION_SECONDS": 0,
    # Cached CIMD documents no client uses (no application, or never valid), untouched this long, are deleted (days).
    "CIMD_CACHE_RETENTION_DAYS": 30,
    # Tool-call audit trail rows (mcp_oauth.models.ToolCallRecord) older than this are deleted (days).
    "TOOL_CALL_RETENTION_DAYS": 90,
    # Where signed-out users go to sign in before approving a client (a path, URL or URL name).
    # None: settings.LOGIN_URL when the site set it or routes Django's default /accounts/login/,
    # else the app's own page /oauth/login (see mcp_oauth.authorization_server.pages.login).
    "LOGIN_URL": None,
    # Modules imported at start-up besides every installed app's TOOLS_MODULE / RESOURCES_MODULE /
    # PROMPTS_MODULE, e.g. ["mysite.mcp_tools"]: tools, resources and prompts can live in a project
    # package that is not an installed app (mcp_oauth.site_modules; manage.py check: W021, W022).
    "TOOL_MODULES": [],
    "RESOURCE_MODULES": [],  # e.g. ["mysite.mcp_resources"]
    "PROMPT_MODULES": [],  # e.g. ["mysite.mcp_prompts"]
    # Refresh-token rotation (mcp_oauth.authorization_server.tokens.rotation): a refresh token that was
    # just rotated out may be presented again for this many seconds (concurrent refreshes of
    # one client) and gets a working sibling pair instead of a family revocation. 0 switches
    # the grace off; at most 300 (manage.py check: mcp_oauth.E090).
    "REFRESH_TOKEN_GRACE_SECONDS": 60,
    # At most this many sibling pairs per refresh generation in the grace window; a further
    # grace request gets invalid_grant without revoking the family (a stolen token replayed in
    # the window cannot mint pairs without end). 0..1000 (manage.py check: mcp_oauth.E043).
    "REFRESH_TOKEN_GRACE_SIBLINGS": 10,
    # --- session lengths (docs/how-to/session-lengths.md; mcp_oauth.authorization_server.tokens.lifetimes) ---
    # The absolute cap of a session (one refresh-token family), in seconds from the authorization:
    # past it every refresh is refused invalid_grant and the user is asked to consent again, however
    # recently the client refreshed. 90 days: a client in daily use re-asks its user once a quarter.
    # The idle window is OAUTH2_PROVIDER["REFRESH_TOKEN_EXPIRE_SECONDS"] (30 days by default), the
    # access-token lifetime ACCESS_TOKEN_EXPIRE_SECONDS; a client's profile and a resource may set
    # their own. None: no cap.
    "SESSION_MAX_SECONDS": 90 * 24 * 3600,  # manage.py check: mcp_oauth.E048
    # Scope hierarchy: a scope grants the scopes it lists (transitively), e.g.
    # {"mcp:admin": ["mcp"]}: a token with mcp:admin passes a check that needs "mcp", and a
    # challenge never asks for a scope that another needed scope already implies
    # (MCP 2026-07-28 "Scope challenge handling"; see mcp_oauth.shared.scopes).
    "SCOPE_HIERARCHY": {},
    # Dotted path of the policy adapter class (mcp_oauth.adapter.get_adapter): token
    # verification, trust verdict, consent-page description, consent skipping, token -> user.
    "ADAPTER": "mcp_oauth.adapter.DefaultMCPAdapter",
    # Template of the consent page (override it in your own templates/ dir).
    "CONSENT_TEMPLATE": "mcp_oauth/authorize.html",
    # Template of the page a member sees when an organization has not approved a client (pending,
    # "an admin of the organization must approve it") or refused it (mcp_oauth.authorization_server
    # .pages.organization_gate); 403, the consent page's security headers.
    "ORGANIZATION_CLIENT_TEMPLATE": "mcp_oauth/organization_client.html",
    # Template of the connected-apps page (the clients a user authorized; revoke one).
    "CONNECTED_APPS_TEMPLATE": "mcp_oauth/connected_apps.html",
    # --- Client ID Metadata Documents (mcp_oauth.authorization_server.cimd; the DOT side is CIMD_* in OAUTH2_PROVIDER) ---
    # How long an authorization or token request waits for the first fetch of a client's
    # metadata document, or for the revalidation of an expired one (seconds). Past it the
    # request is refused (temporarily_unavailable) and the fetch goes on in the background.
    "CIMD_FETCH_WAIT_SECONDS": 10.0,
    # How often a waiting request looks at the database for the fetch's outcome (seconds).
    "CIMD_WAIT_POLL_SECONDS": 0.05,
    # How long one fetch owns a client_id (the cross-process single-flight lease, seconds);
    # longer than CIMD_FETCH_TIMEOUT_SECONDS. A crashed fetch frees the URL after it.
    "CIMD_FETCH_LEASE_SECONDS": 30,
    # Freshness lifetime of a document served without Cache-Control max-age or Expires
    # (seconds; clamped to CIMD_METADATA_MIN/MAX_AGE_SECONDS like any other lifetime).
    "CIMD_DEFAULT_MAX_AGE_SECONDS": 3600,
    # A fresh document is revalidated in the background (conditional request) once it is
    # in this last fraction of its lifetime.
    "CIMD_REFRESH_AHEAD_FRACTION": 0.2,
    # When revalidating an expired document fails, the last valid one is still used for
    # this long after it expired (RFC 5861 stale-if-error, seconds); then the client is refused.
    "CIMD_STALE_IF_ERROR_SECONDS": 3600,
    # CA bundle (PEM file) the fetcher trusts instead of the system's; None: system CAs.
    "CIMD_CA_FILE": None,
    # TESTS ONLY: let the fetcher connect to loopback addresses (127.0.0.0/8, ::1), so a
    # test can serve documents from a local HTTPS server. Never set it in production.
    "CIMD_ALLOW_LOOPBACK_FOR_TESTS": False,
    # --- signed JWT assertions (mcp_oauth.authorization_server.client_auth.assertions) ---
    # private_key_jwt client authentication (RFC 7523 §2.2) and ID-JAGs (RFC 7523 §2.1):
    # the JWS algorithms accepted at all. "none" and the HS* (shared-secret) algorithms are
    # never accepted, whatever this lists (manage.py check: mcp_oauth.E090).
    "ASSERTION_ALGORITHMS": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"],
    # Longest accepted assertion lifetime (exp - now, and how old iat may be), in seconds;
    # it also bounds how long used jti values are kept.
    "ASSERTION_MAX_LIFETIME_SECONDS": 3600,
    # Clock skew tolerated on exp / nbf / iat (seconds).
    "ASSERTION_CLOCK_SKEW_SECONDS": 30,
    # Also accept a client assertion whose aud is the token endpoint URL (RFC 7523 §3, OIDC Core
    # §9). Off: the issuer alone (draft-ietf-oauth-rfc7523bis, audience-injection defence).
    "CLIENT_ASSERTION_ACCEPT_TOKEN_ENDPOINT_AUDIENCE": False,
    # Cache (a CACHES alias) for fetched JWK Sets (clients' jwks_uri, enterprise IdPs' JWKS URLs).
    # Fetched with the CIMD fetcher's SSRF rules; kept for the response's max-age, clamped
    # like CIMD documents. An unknown kid refetches at most once per JWKS_REFETCH_SECONDS.
    "JWKS_CACHE": "default",
    "JWKS_REFETCH_SECONDS": 60,
    # Largest key set accepted at a jwks_uri (bytes) and most keys in one set (inline or fetched).
    # Key sets have their own limit, not CIMD_MAX_DOCUMENT_SIZE: Microsoft Entra ID publishes
    # several RSA keys each with an x5c certificate (about 1.5 KB per key, 9 KB for six).
    "JWKS_MAX_SIZE": 64 * 1024,
    "JWKS_MAX_KEYS": 50,
    # MCP extensions announced in capabilities.extensions (mcp_oauth.mcp_server.transport.extensions):
    # io.modelcontextprotocol/oauth-client-credentials and .../enterprise-managed-authorization.
    "CLIENT_CREDENTIALS_EXTENSION": True,
    "ENTERPRISE_MANAGED_AUTHORIZATION": True,
    # --- token exchange (RFC 8693; mcp_oauth.authorization_server.token_exchange; docs/how-to/token-exchange.md) ---
    # Route urn:ietf:params:oauth:grant-type:token-exchange at the token endpoint and list it in
    # grant_types_supported. Each exchange is still the adapter's decision (token_exchange_decision),
    # which refuses every one by default. False: unsupported_grant_type, not advertised.
    "TOKEN_EXCHANGE": True,
    # --- trust policy (mcp_oauth.authorization_server.client_registry.trust; rules are TrustRule rows, managed in the admin) ---
    # What happens to a CIMD or dynamically registered client no trust rule speaks about:
    # "open" (any https client may be authorized; the consent page calls it unknown),
    # "allowlist" (refused unless a rule allows it) or "review" (it may register, but
    # nobody can authorize it until an administrator allows it). Clients registered in
    # the admin are trusted unless a rule says otherwise.
    "TRUST_MODE": "open",
    # --- throttling (mcp_oauth.shared.throttling) ---
    # Requests per client IP, per endpoint: "<n>/<second|minute|hour|day>", or None for no
    # limit. A site's dict is merged over these defaults. Over the limit: HTTP 429 with
    # Retry-After (seconds).
    # "elicitation" counts the URL-elicitation pages of the elicitation app (start, callback,
    # secure input, connections; SEP-1036: servers MUST rate-limit them).
    "THROTTLE_RATES": {
        "register": "30/hour",
        # identical registrations (same client software) from one address: see
        # mcp_oauth.authorization_server.client_registry.registration_limits
        "register_identical": "10/hour",
        "authorize": "60/minute",
        "token": "120/minute",
        "elicitation": "60/minute",
        "client_auth_failure": "30/minute",
    },
    # Django cache alias holding the counters (use a shared cache, e.g. Redis, with many processes).
    "THROTTLE_CACHE": "default",
    # Dotted path of a callable (request, scope) -> str naming the caller; None: REMOTE_ADDR.
    # Behind a proxy, make REMOTE_ADDR the client's address (uvicorn --proxy-headers, …) or set this.
    "THROTTLE_KEY_FUNCTION": None,
    # Longest accepted authorization-request state (characters; None: unbounded). Longer:
    # invalid_request redirected to the client (mcp_oauth.authorization_server.pages.authorize.check_state).
    "AUTHORIZATION_STATE_MAX_LENGTH": 2048,
    # --- dynamic-registration hygiene (mcp_oauth.tasks.prune_dynamic_clients) ---
    # A dynamically registered client that never obtained a token is deleted this many days
    # after it registered (None: never).
    "DCR_PRUNE_UNUSED_AFTER_DAYS": 1,
    # A dynamically registered client whose tokens have all been expired (and whose refresh
    # tokens are all revoked or expired) for this many days is deleted (None: never).
    "DCR_PRUNE_AFTER_DAYS": 30,
    # Clients examined (and at most deleted) per batch of the prune, each batch its own transaction.
    "DCR_PRUNE_BATCH_SIZE": 1000,
    # --- production shape (mcp_oauth.shared.overload, mcp_oauth.resource_server.cache, mcp_oauth.mcp_server.transport.wakeup) ---
    # Retry-After (seconds) of the 503 answered when the database pool is exhausted, the
    # database is slow past its statement_timeout, or the cache is unreachable.
    "OVERLOAD_RETRY_AFTER_SECONDS": 2,
    # --- health probes and draining (mcp_oauth.health, mcp_oauth.mcp_server.transport.drain) ---
    # --- load shedding and per-client rate limits (mcp_oauth.mcp_server.transport.admission,
    # mcp_oauth.shared.rate_limit) ---
    # MCP requests (POST, DELETE) one worker process works on at once; one more is answered at
    # once with 503 + Retry-After and a JSON-RPC error (-32000 "Server overloaded"). GET streams,
    # event streams once started, and the health probes are not counted. 100: well above the
    # capacity knee of a CPU-bound tools/call on a worker (about 4; docs/how-to/load-shedding.md),
    # so that tools waiting on I/O are not refused, while a burst is refused at once instead of
    # queueing without bound; lower it (a few times the knee) for CPU-bound tools. None: no bound.
    "MCP_MAX_IN_FLIGHT": 100,
    # Retry-After (seconds) of that 503.
    "MCP_SHED_RETRY_AFTER_SECONDS": 1,
    # Per-client token bucket on MCP requests: {"rate": <requests per second>, "burst": <requests>}
    # (burst defaults to the rate, at least 1), per client_id, shared by the workers through a
    # Redis THROTTLE_CACHE (in-process buckets with another cache). Over it: 429 + Retry-After and a
    # JSON-RPC error (-32029 "Rate limit exceeded"). The adapter's mcp_rate_limit() overrides it per
    # client. None: no limit.
    "MCP_RATE_LIMIT": None,
    # --- health probes and draining (mcp_oauth.health, mcp_oauth.mcp_server.transport.drain) ---
    # Liveness probe path: 200 while the process serves, no dependency touched. None: off.
    "LIVENESS_PATH": "/healthz",
    # Readiness probe path: 200 when every check in READINESS_CHECKS is up, else (or while the
    # worker drains) 503 + Retry-After (OVERLOAD_RETRY_AFTER_SECONDS). None: off.
    "READINESS_PATH": "/readyz",
    # Checks of the readiness probe, run concurrently: "database" (a pooled SELECT 1),
    # "cache" (a round trip to the TOKEN_CACHE alias), "broker" (a connection to the Celery
    # broker; "off" when tasks run eagerly or no Celery app is configured).
    "READINESS_CHECKS": ["database", "cache", "broker"],
    # How long one readiness check may take before it counts as down (seconds).
    "READINESS_CHECK_TIMEOUT_SECONDS": 1.0,
    # After SIGTERM/SIGINT: seconds the worker keeps accepting (readiness 503) before the server
    # stops accepting and waits for the responses in flight. 0: at once (gunicorn rolling restarts).
    "DRAIN_DELAY_SECONDS": 0.0,
    # SSE "retry:" (milliseconds) sent as the last field of a stream closed because its worker
    # drains: when the client should reconnect (to another worker).
    "DRAIN_RETRY_MILLISECONDS": 500,
    # Django cache alias holding token principals and the resource-registry generation. Shared
    # (Redis): a revocation reaches every process at once (tombstones). Each process's own
    # (LocMemCache, the embedded default): through the revocation stamp, within
    # REVOCATION_CHECK_SECONDS (mcp_oauth.resource_server.revocation; check mcp_oauth.W071).
    "TOKEN_CACHE": "default",
    # How long one token lookup stays cached at most (seconds; never past the token's expiry).
    # Revocation, deletion, user deactivation and client changes invalidate it (see TOKEN_CACHE).
    "TOKEN_CACHE_SECONDS": 300,
    # How many token-cache entries each worker keeps decoded, next to the bytes they came from
    # (mcp_oauth.resource_server.decoded): the cache is still read on every request, but an
    # unchanged entry is not decoded again. About 8 KB each (1,024: ~8 MB per worker). 0: decode
    # every time.
    "DECODED_TOKEN_ENTRIES": 1024,
    # Whether TOKEN_CACHE is shared by every process of the site (Redis, Memcached, the database
    # or file cache). None: decided from its backend (a LocMemCache, the embedded default, is
    # not). A cache that is not shared is checked against the database's revocation stamp
    # (mcp_oauth.resource_server.revocation), so that a change made by another process is honoured.
    "TOKEN_CACHE_SHARED": None,
    # With a TOKEN_CACHE that is not shared: how long a process trusts what it cached before it
    # re-reads the revocation stamp (one query per process per interval; seconds). A revocation,
    # deletion or deactivation made by another process is honoured within this bound. 0: on
    # every request (one query and one thread hop each).
    "REVOCATION_CHECK_SECONDS": 1.0,
    # How long a worker keeps the token endpoint's clients and trust rules in memory at most
    # (seconds), even when no change is announced through the cache (a change made while the
    # cache was unreachable, a bulk write without bump_clients_generation()). 0: no memory.
    "CLIENT_CACHE_SECONDS": 30,
    # Wake-up channel of waiting streams: None (in-process only, the embedded default),
    # "redis://…" (pub/sub; every worker), or "postgres" (LISTEN/NOTIFY on the default database).
    "WAKEUP_URL": None,
    # A waiting stream re-reads the database this often even without a wake-up (seconds),
    # to recover a missed one. One query per process per interval, not one per stream.
    "WAKEUP_SAFETY_POLL_SECONDS": 5.0,
    # --- MCP 2026-07-28 stateless requests (mcp_oauth.mcp_server.transport.modern / request_state) ---
    # ttlMs of cacheable results (tools/list, server/discover, ...): how long a client may reuse
    # one (milliseconds).
    "RESULT_TTL_MS": 60_000,
    # Keys that seal requestState (AES-256-GCM; MCP 2026-07-28 "Multi round-trip requests"): a
    # list of secrets (str or bytes, at least 32 characters), the first one seals, every one
    # opens (rotation: put the new key first, drop the old one after REQUEST_STATE_TTL_SECONDS).
    # Every worker and host must have the same list (manage.py check_fleet_config compares them).
    # None: one key derived from SECRET_KEY with HKDF, and one from each of SECRET_KEY_FALLBACKS,
    # which open only (manage.py check warns: rotating SECRET_KEY then invalidates pending states).
    "REQUEST_STATE_KEYS": None,
    # Lifetime of one requestState (seconds): the client must answer within it.
    "REQUEST_STATE_TTL_SECONDS": 600,
    # --- MCP Tasks extension (io.modelcontextprotocol/tasks; mcp_oauth.mcp_server.mcp_tasks) ---
    # ttlMs of a task unless its tool says otherwise (milliseconds from creation; None: unlimited).
    # tasks/get answers -32602 "Task has expired" after it; the reconciler deletes it then.
    "TASKS_TTL_MS": 3_600_000,
    # pollIntervalMs suggested to clients (milliseconds).
    "TASKS_POLL_INTERVAL_MS": 1000,
    # Where tasks run: "celery" (a worker; the broker must be configured), "thread" (a thread of
    # the process that created the task: the embedded default), or None: Celery when a real
    # (non-eager) Celery app is configured, else a thread.
    "TASKS_EXECUTOR": None,
    # A running task writes its heartbeat this often (seconds) ...
    "TASKS_HEARTBEAT_SECONDS": 5.0,
    # ... and one without a heartbeat for this long lost its worker (seconds): the reconciler
    # runs it again (the tool's max_retries) or fails it. Keep it well above the heartbeat.
    "TASKS_LEASE_SECONDS": 30.0,
    # A running task reads whether it was cancelled this often (seconds).
    "TASKS_CANCEL_POLL_SECONDS": 1.0,
    # A queued task no executor claimed for this long is queued again (seconds; a lost message).
    "TASKS_QUEUE_GRACE_SECONDS": 60.0,
    # Encrypts results of tools declared with encrypt_result=True: a dotted path to an object with
    # encrypt(str) -> str and decrypt(str) -> str. None: no cipher of mcp_oauth's own (such tools
    # fail manage.py check, mcp_oauth.E093), unless an installed app plugs its own in: the
    # elicitation app plugs in elicitation.crypto (Fernet, ELICITATION["ENCRYPTION_KEYS"]) when the
    # site sets none (AppSettings.plug_default).
    "TASKS_RESULT_CIPHER": None,
    # --- DPoP, RFC 9449 (mcp_oauth.dpop; opt-in per client: ClientProfile.dpop_bound_access_tokens,
    # per resource: ProtectedResource.dpop_required; a proof sent by any client binds its tokens) ---
    # JWS algorithms accepted in DPoP proofs (asymmetric only; published as
    # dpop_signing_alg_values_supported in both metadata documents). [] switches DPoP off.
    "DPOP_SIGNING_ALG_VALUES_SUPPORTED": ["ES256", "ES384", "PS256", "RS256", "EdDSA"],
    # A proof whose iat is older than this is refused (seconds); its jti is remembered this long.
    "DPOP_PROOF_MAX_AGE_SECONDS": 300,
    # Clock skew allowed for a proof's iat in the future (seconds).
    "DPOP_PROOF_LEEWAY_SECONDS": 30,
    # Require a server-provided nonce in every proof (RFC 9449 §8, §9): a proof without the
    # current one gets use_dpop_nonce and a DPoP-Nonce header. Nonces are stateless (HMAC of
    # SECRET_KEY and a time slot): every worker accepts those of the others, and those made under
    # a key of SECRET_KEY_FALLBACKS (a SECRET_KEY rotated host by host).
    "DPOP_NONCE_REQUIRED": False,
    # How long one nonce stays valid (seconds; the previous slot's nonce is accepted too).
    "DPOP_NONCE_LIFETIME_SECONDS": 300,
    # --- Tracing: OpenTelemetry (mcp_oauth.observability.tracing; extra [otel]) ---
    # True: on; False: off (opentelemetry is never imported); "auto": on when the standard
    # OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_SDK_DISABLED
    # is not "true". Everything else (service name, resource attributes, sampler, batching, headers)
    # comes from the standard OTEL_* variables, read by the OpenTelemetry SDK itself.
    "TRACING": "auto",
    # Opt-in (may hold personal data): record a tool call's arguments and result as the span
    # attributes gen_ai.tool.call.arguments / gen_ai.tool.call.result (JSON text).
    "TRACING_CAPTURE_CONTENT": False,
    # --- Prometheus metrics (mcp_oauth.observability.metrics; docs/how-to/metrics.md) ---
    # Count the mcp_* metrics and serve them at METRICS_PATH (needs prometheus-client, the
    # "metrics" extra). False: prometheus_client is not imported, nothing is counted, METRICS_PATH
    # answers 404. Several processes (gunicorn workers, Celery): set PROMETHEUS_MULTIPROC_DIR.
    "METRICS_ENABLED": False,
    # Path of the metrics endpoint (routed by mcp_oauth.urls); None: not routed.
    "METRICS_PATH": "/metrics",
    # Addresses (CIDR strings, REMOTE_ADDR) allowed to scrape; others get 403. []: every address.
    "METRICS_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"],
    # A bearer token the scraper must send (Authorization: Bearer …, compared in constant time);
    # a request without it gets 401. None: no token asked.
    "METRICS_BEARER_TOKEN": None,
    # Add a client_id label to mcp_tool_calls_total and mcp_oauth_grants_issued_total (one series
    # per client: only for a bounded set of clients).
    "METRICS_CLIENT_ID_LABELS": False,
    # --- structured request log (mcp_oauth.observability.request_log) ---
    # One JSON record per HTTP request on the logger "mcp_oauth.requests" (the ASGI application
    # wrapped with request_log_lane; the JSON lines come from LOGGING with its JsonFormatter).
    "REQUEST_LOG_ENABLED": False,
    # --- tool-call audit trail (mcp_oauth.observability.audit_trail; docs/how-to/audit-trail.md) ---
    # One ToolCallRecord row per audited MCP request, written off the request path: queued in memory
    # and inserted in batches by one background thread per process. Off by default (False installs no
    # observer: zero cost); on, a request pays one append to an in-memory queue (no I/O), and the
    # writer's thread about 0.1 ms of CPU per call (bench/observability_overhead.py). The reference
    # site turns it on (MCP_TOOL_CALL_AUDIT=0 turns it off there).
    "TOOL_CALL_AUDIT": False,
    # The JSON-RPC methods audited (keep room for "prompts/get", "resources/read").
    "TOOL_CALL_AUDIT_METHODS": ["tools/call"],
    # The writer inserts what is queued every this many milliseconds ...
    "TOOL_CALL_AUDIT_FLUSH_MILLISECONDS": 200,
    # ... or as soon as this many rows are queued (one bulk INSERT per batch).
    "TOOL_CALL_AUDIT_BATCH_SIZE": 500,
    # Most rows queued per process; when full a record is counted and dropped (the request is
    # never blocked). A crash (SIGKILL) loses at most what is queued: about one flush interval.
    "TOOL_CALL_AUDIT_QUEUE_SIZE": 10000,
    # Keep the tool arguments themselves (JSON), after the adapter's redact_tool_arguments().
    # Off: only their SHA-256 digest is kept.
    "TOOL_CALL_AUDIT_ARGUMENTS": False,
    # --- JWT access tokens (RFC 9068; docs/how-to/jwt-access-tokens.md) ---
    # Issued for the protected resources with jwt_access_tokens on; signed with the keys of
    # AccessTokenSigningKey, published at /oauth/jwks (RFC 8414 jwks_uri).
    # Algorithm of new signing keys: "ES256" (P-256) or "RS256" (3072-bit RSA).
    "JWT_ACCESS_TOKEN_ALGORITHM": "ES256",
    # Secrets the private keys are encrypted under (Fernet, HKDF-derived): the first encrypts,
    # all decrypt. None: SECRET_KEY, then SECRET_KEY_FALLBACKS.
    "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": None,
    # Rotation: a new key is published this many seconds before it signs (resource servers fetch
    # it meanwhile; at least the JWKS cache lifetime of every resource server).
    "JWT_ACCESS_TOKEN_PUBLISH_SECONDS": 86400,
    # The longest access-token lifetime a key must outlive after it stops signing, when the site
    # issues longer ones than ACCESS_TOKEN_EXPIRE_SECONDS and the organizations' (seconds; None: those).
    "JWT_ACCESS_TOKEN_MAX_LIFETIME_SECONDS": None,
    # Clock skew allowed on exp, nbf and iat when this site's resource server checks a JWT (seconds).
    "JWT_ACCESS_TOKEN_LEEWAY_SECONDS": 5,
    # Cache-Control max-age of the JWK Set document (seconds).
    "JWKS_MAX_AGE_SECONDS": 300,
}

#: Settings that hold a dotted path (or the object itself), imported once on first access and kept
#: until ``MCP_OAUTH`` changes (DRF ``IMPORT_STRINGS`` style): no ``import_string()`` on the request path.
IMPORT_STRINGS: frozenset[str] = frozenset(
    {
        "ADAPTER",
        "TOOL_REGISTRY",
        "RESOURCE_REGISTRY",
        "PROMPT_REGISTRY",
        "THROTTLE_KEY_FUNCTION",
        "TASKS_RESULT_CIPHER",
    }
)
