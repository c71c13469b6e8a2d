"""Settings of the reference site, from environment variables.

| variable | default |
| --- | --- |
| DJANGO_SECRET_KEY | a development key (set one in production) |
| DJANGO_DEBUG | "1" |
| DJANGO_ALLOWED_HOSTS | "127.0.0.1,localhost,[::1]" |
| PORT | 8000 (used to build the default MCP_BASE_URL) |
| MCP_BASE_URL | http://127.0.0.1:$PORT |
| DATABASE_URL | sqlite:///db.sqlite3 (e.g. postgres://user@127.0.0.1:5432/test) |
| CELERY_BROKER_URL | unset: tasks run eagerly in-process |
| MCP_REQUEST_STATE_KEYS | comma-separated secrets sealing 2026-07-28 requestState, newest first; unset: derived from SECRET_KEY (check W060) |
| ELICITATION_ENCRYPTION_KEYS | comma-separated Fernet keys, newest first; unset with DEBUG: a key kept in .local/elicitation-keys (created on first use); unset without DEBUG: none |
"""

import os
import tempfile
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-insecure-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz")
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
    "django.middleware.security.SecurityMiddleware",
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
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(tempfile.gettempdir(), f"mcp-authz-test-{os.getpid()}.sqlite3")}
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SECURE_REFERRER_POLICY = "no-referrer"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

PORT = int(os.environ.get("PORT", "8000"))

MCP_OAUTH = {
    "BASE_URL": os.environ.get("MCP_BASE_URL", f"http://127.0.0.1:{PORT}"),
    "DEFAULT_RESOURCE_NAME": "django-mcp-authz demo",
    "DEFAULT_RESOURCE_SCOPES": ["mcp"],
    "REQUEST_STATE_KEYS": [k.strip() for k in os.environ.get("MCP_REQUEST_STATE_KEYS", "").split(",") if k.strip()] or None,
}

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
CELERY_BEAT_SCHEDULE = {
    "mcp-oauth-cleanup": {"task": "mcp_oauth.tasks.cleanup", "schedule": 3600},
    "mcp-oauth-prune-dynamic-clients": {"task": "mcp_oauth.tasks.prune_dynamic_clients", "schedule": 3600},
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


ELICITATION = {
    "ENCRYPTION_KEYS": _elicitation_keys(),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "mcp_oauth": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
        "elicitation": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
    },
}
