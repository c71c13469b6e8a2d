"""Liveness and readiness probes (mcp_oauth.health): each dependency up and down for real.

Live workers (uvicorn, DEBUG off: ``SECURE_SSL_REDIRECT`` on, ``ALLOWED_HOSTS`` = 127.0.0.1)
with the database, the Redis cache or the Celery broker pointed at a real server, a closed port
or a database that PostgreSQL refuses; exact statuses and bodies. Then the same answers through
the URLconf views (a site without the ASGI lane), and while the worker drains.
"""

from __future__ import annotations

import json
import secrets

import httpx2
import pytest
from django.test import override_settings

from mcp_oauth.health import CACHE_PROBE_KEY
from mcp_oauth.mcp_server.transport import drain
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, database_url, require_postgres_and_redis
from tests.support.workers import closed_port, uvicorn_worker, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

READY = {"status": "ready", "checks": {"database": "up", "cache": "up", "broker": "up"}}


@pytest.fixture
def worker():
    """``worker(**env) -> context manager of (base URL)``: one uvicorn worker with ``env``."""
    require_postgres_and_redis()
    import contextlib

    @contextlib.contextmanager
    def start(**env: str):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with uvicorn_worker(port, worker_env(base, "health-" + secrets.token_hex(4), **env)):
            yield base

    return start


def probe(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    response = httpx2.request(method, url, headers=headers, timeout=10)
    return response.status_code, dict(response.headers), response.content


def test_every_dependency_up(worker):
    with worker(CELERY_BROKER_URL=REDIS_URL) as base:
        # A probe by IP on the internal http port: not an allowed host, not https. A page of the
        # site gets 400 (ALLOWED_HOSTS) and the MCP metadata a redirect to https; the probes answer.
        assert httpx2.get(f"{base}/oauth/login", headers={"Host": "10.1.2.3"}).status_code == 400
        redirect = httpx2.get(f"{base}/.well-known/oauth-protected-resource/mcp", headers={"Host": "127.0.0.1"})
        assert redirect.status_code == 301
        assert redirect.headers["location"].startswith("https://")

        status, headers, body = probe(f"{base}/healthz", Host="10.1.2.3")
        assert (status, json.loads(body)) == (200, {"status": "alive"})
        assert headers["cache-control"] == "no-store"
        assert headers["content-type"] == "application/json"

        status, headers, body = probe(f"{base}/readyz", Host="10.1.2.3")
        assert (status, json.loads(body)) == (200, READY)
        assert "retry-after" not in headers

        status, headers, body = probe(f"{base}/readyz", "HEAD", Host="10.1.2.3")
        assert (status, body, headers["content-length"]) == (
            200,
            b"",
            str(len(json.dumps(READY, separators=(",", ":")))),
        )

        status, headers, body = probe(f"{base}/readyz", "POST", Host="10.1.2.3")
        assert (status, headers["allow"], json.loads(body)) == (405, "GET, HEAD", {"error": "method_not_allowed"})


def test_redis_cache_at_a_closed_port_is_down(worker):
    port = closed_port()
    with worker(REDIS_URL=f"redis://127.0.0.1:{port}/0", CELERY_BROKER_URL=REDIS_URL) as base:
        status, headers, body = probe(f"{base}/readyz")
        assert status == 503
        assert headers["retry-after"] == "2"
        assert json.loads(body) == {
            "status": "unavailable",
            "checks": {"database": "up", "cache": "down", "broker": "up"},
        }
        assert probe(f"{base}/healthz")[0] == 200  # liveness touches no dependency


def test_a_database_that_refuses_is_down(worker):
    refused = database_url().rsplit("/", 1)[0] + "/h_sd_no_such_database"  # PostgreSQL: FATAL, refused
    with worker(DATABASE_URL=refused, CELERY_BROKER_URL=REDIS_URL) as base:
        status, headers, body = probe(f"{base}/readyz")
        assert (status, headers["retry-after"]) == (503, "2")
        assert json.loads(body) == {
            "status": "unavailable",
            "checks": {"database": "down", "cache": "up", "broker": "up"},
        }


def test_a_database_at_a_closed_port_is_down(worker):
    with worker(DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed_port()}/x", CELERY_BROKER_URL=REDIS_URL) as base:
        status, _, body = probe(f"{base}/readyz")
        assert (status, json.loads(body)["checks"]["database"]) == (503, "down")


def test_broker_at_a_closed_port_is_down(worker):
    with worker(CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port()}/0") as base:
        status, headers, body = probe(f"{base}/readyz")
        assert (status, headers["retry-after"]) == (503, "2")
        assert json.loads(body) == {
            "status": "unavailable",
            "checks": {"database": "up", "cache": "up", "broker": "down"},
        }


def test_an_amqp_broker(worker):
    """RabbitMQ up (when it runs here), then an AMQP broker at a closed port."""
    amqp = "amqp://guest:guest@127.0.0.1:5672//"
    try:
        import kombu

        with kombu.Connection(amqp, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:  # noqa: BLE001 - no RabbitMQ here
        pytest.skip(f"no RabbitMQ at 127.0.0.1:5672: {exc}")
    with worker(CELERY_BROKER_URL=amqp) as base:
        status, _, body = probe(f"{base}/readyz")
        assert (status, json.loads(body)) == (200, READY)
    with worker(CELERY_BROKER_URL=f"amqp://guest:guest@127.0.0.1:{closed_port()}//") as base:
        status, _, body = probe(f"{base}/readyz")
        assert (status, json.loads(body)["checks"]) == (503, {"database": "up", "cache": "up", "broker": "down"})


def test_no_broker_configured_is_off(worker):
    """Tasks run eagerly without CELERY_BROKER_URL: no broker to need."""
    with worker() as base:
        status, _, body = probe(f"{base}/readyz")
        assert (status, json.loads(body)) == (
            200,
            {"status": "ready", "checks": {"database": "up", "cache": "up", "broker": "off"}},
        )


def test_a_cache_that_never_answers_is_down_within_the_check_timeout(worker):
    """A listener that accepts and never answers: the cache's 1 s socket timeout (or the check's
    own) ends the check; the probe still answers (503)."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        port = silent.getsockname()[1]
        with worker(REDIS_URL=f"redis://127.0.0.1:{port}/0", CELERY_BROKER_URL=REDIS_URL) as base:
            status, _, body = probe(f"{base}/readyz")
            assert (status, json.loads(body)["checks"]) == (503, {"database": "up", "cache": "down", "broker": "up"})
    finally:
        silent.close()


# --- the URLconf views (a site without health_lane) ---------------------------------------


def test_views_through_the_urlconf(client, settings):
    status = client.get("/healthz")
    assert (status.status_code, status.json(), status["Cache-Control"]) == (200, {"status": "alive"}, "no-store")
    ready = client.get("/readyz")
    # tests run Celery eagerly and on the local-memory cache
    assert (ready.status_code, ready.json()) == (
        200,
        {"status": "ready", "checks": {"database": "up", "cache": "up", "broker": "off"}},
    )
    refused = client.post("/readyz")
    assert (refused.status_code, refused["Allow"]) == (405, "GET, HEAD")


def test_views_answer_503_while_draining(client):
    drain.begin()
    try:
        ready = client.get("/readyz")
        assert (ready.status_code, ready["Retry-After"], ready.json()) == (503, "2", {"status": "draining"})
        assert client.get("/healthz").status_code == 200
    finally:
        drain.reset()


def test_readiness_checks_setting_and_a_raising_cache(client, settings):
    """Only the configured checks run; a cache backend that raises is down, never a 500."""
    settings.CACHES = {
        **settings.CACHES,
        "broken": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
        },
    }
    with override_settings(MCP_OAUTH={**settings.MCP_OAUTH, "TOKEN_CACHE": "broken", "READINESS_CHECKS": ["cache"]}):
        ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, {"status": "unavailable", "checks": {"cache": "down"}})


def test_the_cache_probe_key_is_never_written(client):
    from django.core.cache import cache

    client.get("/readyz")
    assert cache.get(CACHE_PROBE_KEY, "absent") == "absent"


@pytest.mark.parametrize(
    "overrides, problems",
    [
        ({}, 0),
        ({"LIVENESS_PATH": None, "READINESS_PATH": None}, 0),
        ({"LIVENESS_PATH": "healthz"}, 1),
        ({"READINESS_PATH": "/mcp"}, 1),
        ({"READINESS_PATH": "/healthz"}, 1),
        ({"READINESS_CHECKS": ["database", "disk"]}, 1),
        ({"READINESS_CHECKS": "database"}, 1),
        ({"READINESS_CHECK_TIMEOUT_SECONDS": 0}, 1),
        ({"DRAIN_DELAY_SECONDS": -1}, 1),
        ({"DRAIN_RETRY_MILLISECONDS": 0.5}, 1),
        ({"DRAIN_RETRY_MILLISECONDS": True, "DRAIN_DELAY_SECONDS": "3"}, 2),
    ],
)
def test_probe_and_drain_settings_are_checked(settings, overrides, problems):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    assert [m.id for m in run_checks() if m.id == "mcp_oauth.E080"] == ["mcp_oauth.E080"] * problems


def test_probing_a_hung_broker_never_starves_the_token_endpoint(worker):
    """A broker that accepts and never answers, probed 60 times (bursts of 20 at once, as load
    balancers and orchestrators do): every probe answers 503 naming the broker, and the token
    endpoint, which runs on the request threads, still answers each request at once (before, each
    probe held a request thread on the broker and /oauth/token hung after about 33 probes)."""
    import socket
    import time
    from concurrent.futures import ThreadPoolExecutor

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(128)
    try:
        broker = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        with worker(CELERY_BROKER_URL=broker) as base:
            with ThreadPoolExecutor(20) as pool:
                for _ in range(3):
                    answers = list(pool.map(lambda _: probe(f"{base}/readyz"), range(20)))
                    assert {(status, json.loads(body)["checks"]["broker"]) for status, _, body in answers} == {
                        (503, "down")
                    }
                    started = time.monotonic()
                    token = httpx2.post(
                        f"{base}/oauth/token",
                        data={"grant_type": "password"},
                        headers={"X-Forwarded-Proto": "https"},  # uvicorn trusts it from loopback
                        timeout=10,
                    )
                    assert token.status_code == 400, token.text
                    assert token.json()["error"] == "unsupported_grant_type"
                    assert time.monotonic() - started < 5
    finally:
        silent.close()
