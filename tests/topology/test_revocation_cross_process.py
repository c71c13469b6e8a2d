"""A revocation made by a *second process* reaches every worker within the documented bound.

Both runtime shapes, both eras, real processes on loopback:

* **embedded** (``make run``): one uvicorn process, no Redis (the token cache is its own
  ``LocMemCache``), on the test database (SQLite or PostgreSQL). The change is honoured within
  ``REVOCATION_CHECK_SECONDS`` (1 s) plus one request: the revocation stamp
  (:mod:`mcp_oauth.resource_server.revocation`). Before it, 297.9 s (``TOKEN_CACHE_SECONDS``).
* **production** (``make serve``): gunicorn with 2 uvicorn workers, PostgreSQL, Redis: the
  first request after the commit is refused by both workers (tombstones in the shared cache).

The change is made by ``manage.py shell -c`` (user deleted, RFC 7009 token revocation, the
user's grants revoked, client deleted) after the token was served (and cached) by every worker;
each worker is then asked on a connection pinned to it (:mod:`tests.support.pinned_workers`). Not
timed beyond the bound: ``bench/revocation.py`` measures.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.pinned_workers import Worker
from tests.support.topology import REDIS_URL, require_postgres_and_redis
from tests.support.workers import ROOT, gunicorn_server, uvicorn_worker, worker_env, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ACCEPT = "application/json, text/event-stream"
MODERN, OLD = "2026-07-28", "2025-11-25"
#: REVOCATION_CHECK_SECONDS (the default) plus one request on this loaded 2-core machine.
EMBEDDED_BOUND = 1.0 + 1.0

CHANGES = {
    "user_deleted": "get_user_model().objects.get(pk={user}).delete()",
    "token_revoked": "[t.revoke() for t in get_access_token_model().objects.filter(user_id={user})]",
    "grant_revoked": "revoke_user_grants(get_user_model().objects.get(pk={user}), reason='user_disconnected')",
    "client_deleted": "get_application_model().objects.get(pk={client}).delete()",
}
PRELUDE = (
    "from django.contrib.auth import get_user_model; "
    "from oauth2_provider.models import get_access_token_model, get_application_model; "
    "from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants; "
)


def second_process(env: dict[str, str], code: str) -> None:
    """``manage.py shell -c code`` as its own process; returns once it exited (committed)."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PRELUDE + code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def whoami(worker: Worker, token: str, era: str, session: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    if era == MODERN:
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "whoami"})
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        params = {"name": "whoami", "_meta": meta}
    else:
        headers.update({"MCP-Protocol-Version": OLD, "Mcp-Session-Id": session or ""})
        params = {"name": "whoami", "arguments": {}}
    return worker.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}, headers)[0]


def open_session(worker: Worker, token: str) -> str:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    params = {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "revocation", "version": "1"}}
    status, session = worker.post(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, headers, want="mcp-session-id"
    )
    assert status == 200 and session
    return session


def fresh_principal(django_user_model, mint_token, resource_uri: str, name: str):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    user = django_user_model.objects.create_user(name, password=None)
    client = Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    return user, client, mint_token(user, client, "mcp", resource_uri)


def revoke_everywhere(workers, env, django_user_model, mint_token, resource_uri, bound: float | None) -> list[str]:
    """Every change in both eras: the seconds from the second process's exit to the last
    worker's 401 must be within ``bound`` (None: the first request of every worker is 401)."""
    failures = []
    for kind, code in CHANGES.items():
        for era in (MODERN, OLD):
            user, client, token = fresh_principal(django_user_model, mint_token, resource_uri, f"{kind}-{era}")
            session = open_session(workers[0], token) if era == OLD else None
            for worker in workers:
                assert whoami(worker, token, era, session) == 200  # served, so cached, by every worker
            second_process(env, code.format(user=user.pk, client=client.pk))
            committed = time.monotonic()
            refused: dict[int, float] = {}
            statuses = []
            while len(refused) < len(workers) and time.monotonic() - committed < 30:
                for worker in workers:
                    status = whoami(worker, token, era, session)
                    statuses.append(status)
                    if status == 401:
                        refused.setdefault(worker.pid, time.monotonic() - committed)
                    elif worker.pid in refused:
                        failures.append(f"{kind} {era}: 200 again after 401 on worker {worker.pid}")
                time.sleep(0.01)
            if any(status >= 500 for status in statuses):
                failures.append(f"{kind} {era}: a 5xx ({statuses})")
            if len(refused) < len(workers):
                failures.append(f"{kind} {era}: still accepted after 30 s ({statuses[-4:]})")
            elif bound is None and statuses[: len(workers)] != [401] * len(workers):
                failures.append(f"{kind} {era}: first requests after the change {statuses[: len(workers)]}")
            elif bound is not None and max(refused.values()) > bound:
                failures.append(f"{kind} {era}: refused after {max(refused.values()):.2f} s > {bound} s")
    return failures


@pytest.fixture
def site(settings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    assert ensure_default_resource().uri == f"{base}/mcp"
    return port, base


def test_embedded_shape_honours_a_revocation_from_another_process_within_the_bound(site, django_user_model, mint_token):
    port, base = site
    env = worker_env(base, "unused", DJANGO_INSECURE_LOOPBACK_HTTP="1")
    env.pop("REDIS_URL")  # make run: no Redis, the token cache is each process's LocMem
    resource_uri = f"{base}/mcp"
    with uvicorn_worker(port, env) as process:
        workers = [Worker(port, process.pid, [process.pid])]
        failures = revoke_everywhere(workers, env, django_user_model, mint_token, resource_uri, EMBEDDED_BOUND)
    assert failures == []


def test_production_shape_refuses_a_revocation_from_another_process_on_both_workers_at_once(
    site, django_user_model, mint_token
):
    require_postgres_and_redis()
    port, base = site
    env = worker_env(base, "revx-" + str(port), DJANGO_INSECURE_LOOPBACK_HTTP="1", REDIS_URL=REDIS_URL)
    resource_uri = f"{base}/mcp"
    with gunicorn_server(port, env, workers=2) as master:
        deadline = time.monotonic() + 30
        while len(worker_pids(master)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = worker_pids(master)
        assert len(pids) == 2
        workers = [Worker(port, pid, pids) for pid in pids]
        failures = revoke_everywhere(workers, env, django_user_model, mint_token, resource_uri, None)
    assert failures == []
