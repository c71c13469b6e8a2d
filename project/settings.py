"""Settings of the reference site, from environment variables.

| variable | default |
| --- | --- |
| DJANGO_SECRET_KEY | a development key (set one in production) |
| DJANGO_SECRET_KEY_FALLBACKS | comma-separated earlier secret keys, still accepted (rotation); none |
| DJANGO_DEBUG | "1" |
| DJANGO_ALLOWED_HOSTS | "127.0.0.1,localhost,[::1]" |
| PORT | 8000 (used to build the default MCP_BASE_URL) |
| MCP_BASE_URL | http://127.0.0.1:$PORT |
| DATABASE_URL | sqlite:///db.sqlite3 (e.g. postgres://user@127.0.0.1:5432/test) |
| CELERY_BROKER_URL | unset: tasks run eagerly in-process |
| DJANGO_STATIC_ROOT | BASE_DIR/staticfiles (where `collectstatic` puts the static files served without DEBUG) |
| MCP_REQUEST_STATE_KEYS | comma-separated secrets sealing 2026-07-28 requestState, newest first; unset: derived from SECRET_KEY (check W060) |
| DB_POOL_MAX_SIZE | 8: PostgreSQL connections per worker process at most (Django's psycopg pool) |
| DB_POOL_MIN_SIZE | 1 |
| DB_POOL_TIMEOUT | 5: seconds a request waits for a pooled connection before its 503 + Retry-After |
| DB_STATEMENT_TIMEOUT_MS | 10000: PostgreSQL statement_timeout (a slow database answers 503, not a hang) |
| REDIS_URL | unset: per-process memory cache; set: Django's Redis cache (tokens, throttles, resources) |
| MCP_WAKEUP_URL | unset: REDIS_URL when set, else in-process wake-ups; "postgres" for LISTEN/NOTIFY |
| MCP_SSE_POLL_INTERVAL_SECONDS | 0.25: how often waiting streams poll when no shared wake-up channel is configured |
| MCP_THROTTLE_RATES | JSON merged over the default THROTTLE_RATES, e.g. '{"token": null}' |
| MCP_DRAIN_DELAY_SECONDS | 0: seconds a worker told to stop keeps accepting, readiness 503, before it stops (mcp_oauth.mcp_server.transport.drain) |
| ELICITATION_ENCRYPTION_KEYS | comma-separated Fernet keys, newest first; unset with DEBUG: a key kept in .local/elicitation-keys (created on first use); unset without DEBUG: none |
| DJANGO_SECURE_SSL_REDIRECT | "1" without DEBUG: http requests are redirected to https |
| DJANGO_HSTS_SECONDS | 31536000 without DEBUG (Strict-Transport-Security max-age) |
| DJANGO_HSTS_INCLUDE_SUBDOMAINS, DJANGO_HSTS_PRELOAD | "1" without DEBUG |
| DJANGO_SECURE_PROXY_SSL_HEADER | unset; behind a TLS proxy that sets X-Forwarded-Proto: HTTP_X_FORWARDED_PROTO |
| (derived) CSRF_TRUSTED_ORIGINS | the origin of MCP_BASE_URL (a TLS proxy on a non-default port: docs/how-to/production.md) |
| DJANGO_INSECURE_LOOPBACK_HTTP | unset; "1": without DEBUG over plain http, loopback only (no https redirect, no HSTS, cookies without Secure); ImproperlyConfigured when MCP_BASE_URL or DJANGO_ALLOWED_HOSTS is not loopback |

Production: the variables docs/how-to/production.md marks required (DJANGO_DEBUG=0,
DJANGO_SECRET_KEY, MCP_BASE_URL=https://…, DJANGO_ALLOWED_HOSTS, DJANGO_SECURE_PROXY_SSL_HEADER,
DATABASE_URL, REDIS_URL, CELERY_BROKER_URL, ELICITATION_ENCRYPTION_KEYS, MCP_REQUEST_STATE_KEYS);
`manage.py check --deploy` is then clean (tests/mcp_oauth/test_checks.py reads that table).
"""

import json
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from mcp_oauth.shared.loopback import is_loopback_host

BASE_DIR = Path(__file__).resolve().parent.parent

# The development key's "django-insecure-" prefix makes `check --deploy` report it (security.W009).
SECRET_KEY = os.environ.get(
    "DJANGO_SECRET_KEY", "django-insecure-dev-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz"
)
# Earlier keys still accepted (rotation host by host: docs/how-to/many-hosts.md).
SECRET_KEY_FALLBACKS = [k.strip() for k in os.environ.get("DJANGO_SECRET_KEY_FALLBACKS", "").split(",") if k.strip()]
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "oauth2_provider",
    "mcp_oauth",
    "elicitation",
    "project",
]

MIDDLEWARE = [
    "mcp_oauth.shared.overload.OverloadMiddleware",  # first: 503 + Retry-After when the DB pool or cache is exhausted
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files from the ASGI app itself (uvicorn)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"), conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so that the live ASGI server of the end-to-end tests
    # (another thread) sees the test database; waits on locks instead of failing.
    # One file per process, so concurrent test runs never share it.
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"mcp-authz-test-{os.getpid()}.sqlite3")
    }
    # BEGIN IMMEDIATE: a transaction takes the write lock when it starts, so two threads that
    # both read and then write wait for each other instead of one failing at once ("database is
    # locked": SQLite cannot upgrade a read lock while another writer waits).
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 30, "transaction_mode": "IMMEDIATE"})
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's built-in psycopg pool (Django >= 5.1): bounded connections per process; a request
    # that waits longer than "timeout" for one gets 503 + Retry-After (mcp_oauth.shared.overload).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "pool": {
                "min_size": int(os.environ.get("DB_POOL_MIN_SIZE", "1")),
                "max_size": int(os.environ.get("DB_POOL_MAX_SIZE", "8")),
                "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "5")),
            },
            "options": f"-c statement_timeout={int(os.environ.get('DB_STATEMENT_TIMEOUT_MS', '10000'))}",
        }
    )

REDIS_URL = os.environ.get("REDIS_URL") or None
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "mcp_oauth.shared.redis_cache.RedisCache",  # Django's, reusing its redis client
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "mcp"),
            "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
    }

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",  # user passwords (the first entry)
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
    "mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher",  # OAuth client secrets (mcp_oauth.authorization_server.client_auth.client_secrets)
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Static files (the admin's CSS and JavaScript) are served by WhiteNoise from the ASGI app, so
# `make run` / uvicorn needs no web server in front. With DEBUG they come straight from the apps
# (finders, reloaded on change); without DEBUG from STATIC_ROOT, filled by
# `manage.py collectstatic` (`make run` does it), compressed and with hashed names.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# same-origin: no authorization request, code or elicitation id leaks to another site in a Referer, and
# the browser still sends a real Origin on the site's own form POSTs (with no-referrer it sends
# "Origin: null", which Django's CSRF check refuses; WHATWG Fetch "serializing a request origin").
SECURE_REFERRER_POLICY = "same-origin"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

PORT = int(os.environ.get("PORT", "8000"))


def _max_in_flight(value: str) -> int | None:
    """``MCP_MAX_IN_FLIGHT``: a number of requests per worker, or ``none`` (no bound)."""
    return None if value.strip().lower() in ("", "none", "off") else int(value)


MCP_OAUTH = {
    "BASE_URL": os.environ.get("MCP_BASE_URL", f"http://127.0.0.1:{PORT}"),
    "DEFAULT_RESOURCE_NAME": "django-mcp-authz demo",
    "DEFAULT_RESOURCE_SCOPES": ["mcp"],
    # One RFC 8693 token exchange allowed: the MCP endpoint's tokens for the site's /api (my_site_profile tool)
    "ADAPTER": "project.mcp_adapter.ReferenceSiteAdapter",
    # The tool-call audit trail (docs/how-to/audit-trail.md): on unless MCP_TOOL_CALL_AUDIT=0.
    "TOOL_CALL_AUDIT": os.environ.get("MCP_TOOL_CALL_AUDIT", "1") != "0",
    "REQUEST_STATE_KEYS": [k.strip() for k in os.environ.get("MCP_REQUEST_STATE_KEYS", "").split(",") if k.strip()]
    or None,
    "WAKEUP_URL": os.environ.get("MCP_WAKEUP_URL") or REDIS_URL,
    "SSE_POLL_INTERVAL_SECONDS": float(os.environ.get("MCP_SSE_POLL_INTERVAL_SECONDS", "0.25")),
    # e.g. MCP_THROTTLE_RATES='{"token": null}' (JSON) for a load test from one address
    "THROTTLE_RATES": json.loads(os.environ.get("MCP_THROTTLE_RATES", "{}")),
    # seconds a stopping worker keeps accepting (readiness 503) before it stops (mcp_oauth.mcp_server.transport.drain)
    "DRAIN_DELAY_SECONDS": float(os.environ.get("MCP_DRAIN_DELAY_SECONDS", "0")),
    # load shedding (mcp_oauth.mcp_server.transport.admission): MCP_MAX_IN_FLIGHT=<n per worker>
    # or "none"; MCP_RATE_LIMIT='{"rate": 50, "burst": 100}' (JSON, per client; unset: no limit)
    **(
        {"MCP_MAX_IN_FLIGHT": _max_in_flight(os.environ["MCP_MAX_IN_FLIGHT"])}
        if "MCP_MAX_IN_FLIGHT" in os.environ
        else {}
    ),
    "MCP_RATE_LIMIT": json.loads(os.environ.get("MCP_RATE_LIMIT") or "null"),
}

# Prometheus metrics at /metrics (docs/how-to/metrics.md): MCP_METRICS=1 turns them on;
# MCP_METRICS_ALLOWED_NETWORKS (comma-separated CIDRs; default loopback, "" with a token: any
# address), MCP_METRICS_TOKEN (a bearer token the scraper sends). MCP_REQUEST_LOG=1: one JSON line
# per request on stderr (logger mcp_oauth.requests).
if os.environ.get("MCP_METRICS") == "1":
    MCP_OAUTH["METRICS_ENABLED"] = True
    if "MCP_METRICS_ALLOWED_NETWORKS" in os.environ:
        MCP_OAUTH["METRICS_ALLOWED_NETWORKS"] = [
            n.strip() for n in os.environ["MCP_METRICS_ALLOWED_NETWORKS"].split(",") if n.strip()
        ]
    MCP_OAUTH["METRICS_BEARER_TOKEN"] = os.environ.get("MCP_METRICS_TOKEN") or None
    SECURE_REDIRECT_EXEMPT = [r"^metrics$"]  # Prometheus scrapes the workers over plain http
MCP_OAUTH["REQUEST_LOG_ENABLED"] = os.environ.get("MCP_REQUEST_LOG") == "1"

# The origin clients use (MCP_BASE_URL) is trusted for CSRF: behind a TLS proxy that forwards
# "Host: $host" (no port) the browser's Origin https://host:8443 would not match the Host Django
# sees, and every form POST (login, consent) would answer 403.
CSRF_TRUSTED_ORIGINS = ["{0.scheme}://{0.netloc}".format(urlsplit(MCP_OAUTH["BASE_URL"]))]

OAUTH2_PROVIDER = {
    "SCOPES": {
        "mcp": "Use the demo MCP tools on your behalf",
        "profile": "Read your user name and e-mail address",
    },
    "DEFAULT_SCOPES": ["mcp"],
}

# Celery: a broker when configured, else eager in-process execution.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Beat once per deployment: a beat that finds another holding the lease stands by (mcp_oauth.beat).
CELERY_BEAT_SCHEDULER = "mcp_oauth.beat:SingleBeatScheduler"
CELERY_BEAT_SCHEDULE = {
    "mcp-oauth-cleanup": {"task": "mcp_oauth.tasks.cleanup", "schedule": 3600},
    "mcp-oauth-prune-dynamic-clients": {"task": "mcp_oauth.tasks.prune_dynamic_clients", "schedule": 3600},
    "mcp-oauth-prune-refresh-generations": {"task": "mcp_oauth.tasks.prune_refresh_generations", "schedule": 3600},
    "mcp-oauth-reconcile-tasks": {"task": "mcp_oauth.mcp_tasks.reconcile", "schedule": 10},
    "elicitation-reconcile-notifications": {
        "task": "elicitation.tasks.reconcile_completion_notifications",
        "schedule": 10,
    },
    "elicitation-expire": {"task": "elicitation.tasks.expire_elicitations", "schedule": 60},
    "elicitation-cleanup": {"task": "elicitation.tasks.cleanup", "schedule": 3600},
}


def _elicitation_keys() -> list[str]:
    """Fernet keys for third-party tokens and secrets (never derived from SECRET_KEY)."""
    configured = os.environ.get("ELICITATION_ENCRYPTION_KEYS")
    if configured:
        return [key.strip() for key in configured.split(",") if key.strip()]
    if not DEBUG:
        return []
    # Development only: one key kept next to the database, so stored tokens survive restarts.
    path = BASE_DIR / ".local" / "elicitation-keys"
    if not path.exists():
        from cryptography.fernet import Fernet

        path.parent.mkdir(exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(Fernet.generate_key().decode() + "\n")
    return path.read_text().split()


def _refuse_loopback_http_off_loopback(base_url: str, allowed_hosts: list[str]) -> None:
    """DJANGO_INSECURE_LOOPBACK_HTTP is for loopback only (RFC 8252 §8.3: plain http is acceptable
    there alone). :raises ImproperlyConfigured: MCP_BASE_URL or an ALLOWED_HOSTS entry is not loopback."""
    if not is_loopback_host(urlsplit(base_url).hostname):
        raise ImproperlyConfigured(
            f"DJANGO_INSECURE_LOOPBACK_HTTP=1 serves plain http on loopback only; MCP_BASE_URL={base_url} is not "
            "loopback. Behind a TLS proxy, leave it unset and set DJANGO_SECURE_PROXY_SSL_HEADER instead."
        )
    public = [host for host in allowed_hosts if not is_loopback_host(host)]
    if public:
        raise ImproperlyConfigured(
            f"DJANGO_INSECURE_LOOPBACK_HTTP=1 serves plain http on loopback only; DJANGO_ALLOWED_HOSTS names "
            f"{', '.join(public)}."
        )


ELICITATION = {
    "ENCRYPTION_KEYS": _elicitation_keys(),
}

# Everything to stderr (logging.StreamHandler's default stream). django.request has a handler of
# its own: Django's default one (its "console" handler) prints
# only with DEBUG, so without it a 500 would leave no trace; an error record carries the traceback
# (exc_info), which the formatter prints after the line.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "mcp_oauth.observability.request_log.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "errors": {"class": "logging.StreamHandler", "formatter": "plain"},
        "requests": {"class": "logging.StreamHandler", "formatter": "json"},
    },
    "loggers": {
        # the structured request log (MCP_REQUEST_LOG=1): one JSON line per request
        "mcp_oauth.requests": {"handlers": ["requests"], "level": "INFO", "propagate": False},
        "mcp_oauth": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
        "elicitation": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
        # 5xx with their tracebacks (4xx are warnings: left out); not propagated to "django"
        # (whose DEBUG console would print them twice)
        "django.request": {"handlers": ["errors"], "level": "ERROR", "propagate": False},
    },
}

# --- Production (DJANGO_DEBUG=0): https only, secure cookies, HSTS ---------------------------------
# TLS terminates in front of the site (a proxy that sets X-Forwarded-Proto, named by
# DJANGO_SECURE_PROXY_SSL_HEADER); the issuer and every URL the site announces come from
# MCP_BASE_URL, never from a request's Host or X-Forwarded-* headers (USE_X_FORWARDED_HOST stays off).
# DJANGO_INSECURE_LOOPBACK_HTTP=1 runs without DEBUG over plain http, for loopback only: no https
# redirect, no HSTS, cookies without the Secure flag (a browser would not send them back over http).
LOOPBACK_HTTP = os.environ.get("DJANGO_INSECURE_LOOPBACK_HTTP", "0") == "1"
if LOOPBACK_HTTP:
    _refuse_loopback_http_off_loopback(MCP_OAUTH["BASE_URL"], ALLOWED_HOSTS)
if not DEBUG:
    SECURE_SSL_REDIRECT = not LOOPBACK_HTTP and os.environ.get("DJANGO_SECURE_SSL_REDIRECT", "1") == "1"
    SESSION_COOKIE_SECURE = not LOOPBACK_HTTP
    CSRF_COOKIE_SECURE = not LOOPBACK_HTTP
    SECURE_HSTS_SECONDS = 0 if LOOPBACK_HTTP else int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("DJANGO_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
    SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_HSTS_PRELOAD", "1") == "1"
    if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER"):
        SECURE_PROXY_SSL_HEADER = (os.environ["DJANGO_SECURE_PROXY_SSL_HEADER"], "https")
