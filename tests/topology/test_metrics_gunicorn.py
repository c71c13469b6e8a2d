"""Metrics under the production topology: ``make serve``'s gunicorn command line with 2 uvicorn
workers, prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR).

* tool calls and grants spread over both workers are summed in one scrape of either;
* a worker killed with SIGKILL (replaced by gunicorn's master) keeps its counts: its files stay
  in the directory and are still summed.

Skipped unless DATABASE_URL names PostgreSQL and Redis answers (tests/topology.py).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest
from oauth2_provider.models import get_application_model
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from mcp_oauth.observability.metrics_gunicorn import prepare_multiprocess_dir
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.serve import commands
from tests.support.live import free_port
from tests.support.topology import redis_cache_settings, require_postgres_and_redis, wait_until_serving
from tests.support.workers import worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
V = "2026-07-28"


@pytest.fixture
def served(settings, tmp_path):
    """``make serve``'s web command (2 workers, the metrics hooks) with metrics on; yields
    ``(base URL, master process, multiprocess directory)``."""
    require_postgres_and_redis()
    prefix = "metrics-" + secrets.token_hex(4)
    settings.CACHES = redis_cache_settings(prefix)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    directory = prepare_multiprocess_dir(tmp_path / "multiproc")
    env = worker_env(
        base,
        prefix,
        MCP_METRICS="1",
        PROMETHEUS_MULTIPROC_DIR=str(directory),
        DJANGO_INSECURE_LOOPBACK_HTTP="1",
        MCP_THROTTLE_RATES='{"token": null}',
        HOST="127.0.0.1",
        PORT=str(port),
        WORKERS="2",
    )
    [(name, argv, _)] = [spec for spec in commands(env) if spec[0] == "web"]
    assert "python:project.gunicorn_config" in argv  # its child_exit is metrics_gunicorn's
    master = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(master, port)
        wait_for_workers(master.pid, 2)
        yield base, master, directory
    finally:
        master.terminate()
        try:
            master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait(timeout=5)
        from django.core.cache import cache

        cache.clear()


def worker_pids(master_pid: int) -> list[int]:
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return sorted(int(pid) for pid in children)


def wait_for_workers(master_pid: int, count: int, other_than: set[int] = frozenset(), timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = worker_pids(master_pid)
        if len(pids) == count and not (set(pids) & other_than):
            return pids
        time.sleep(0.1)
    raise AssertionError(f"gunicorn did not have {count} workers: {worker_pids(master_pid)}")


def tool_call(base: str, token: str) -> int:
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }
    response = httpx2.post(f"{base}/mcp", headers=headers, json=message, timeout=30)  # a new connection each
    assert response.json()["result"]["isError"] is False, response.text
    return response.status_code


def calls_by_pid(directory: Path) -> dict[int, float]:
    """``mcp_tool_calls_total`` of each process, read from its own file."""
    counts = {}
    for path in directory.glob("counter_*.db"):
        total = 0.0
        for key, value, _timestamp, _pos in MmapedDict.read_all_values_from_file(str(path)):
            if json.loads(key)[1] == "mcp_tool_calls_total":
                total += value
        counts[int(path.stem.rpartition("_")[2])] = total
    return counts


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    response = httpx2.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def echo_calls(sample: dict) -> float:
    return sample.get(("mcp_tool_calls_total", (("outcome", "ok"), ("tool", "echo"))), 0.0)


def test_counts_are_summed_over_workers_and_survive_a_sigkill(served, user, public_app, mint_token):
    base, master, directory = served
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    sent = 0
    with ThreadPoolExecutor(6) as pool:
        for _ in range(6):  # until both workers served some (connections are spread by the kernel)
            sent += sum(1 for status in pool.map(lambda _: tool_call(base, token), range(12)) if status == 200)
            if sum(1 for count in calls_by_pid(directory).values() if count > 0) >= 2:
                break
    per_worker = calls_by_pid(directory)
    assert sum(1 for count in per_worker.values() if count > 0) == 2, per_worker
    assert sum(per_worker.values()) == sent

    Application = get_application_model()
    service = Application(name="svc", client_type="confidential", authorization_grant_type="client-credentials")
    secret = service.client_secret
    service.save()
    basic = "Basic " + base64.b64encode(f"{service.client_id}:{secret}".encode()).decode()
    for _ in range(5):
        granted = httpx2.post(
            f"{base}/oauth/token",
            headers={"Authorization": basic},
            data={"grant_type": "client_credentials"},
            timeout=10,
        )
        assert granted.status_code == 200, granted.text

    first = scrape(base)
    assert echo_calls(first) == sent
    grants = (
        "mcp_oauth_grants_issued_total",
        (("client_auth", "client_secret_basic"), ("grant_type", "client_credentials")),
    )
    assert first[grants] == 5
    assert first[("mcp_request_duration_seconds_count", (("era", "modern"), ("method", "tools/call")))] == sent

    # SIGKILL a worker that counted calls: the master replaces it, its counts stay in the sum
    victim = max(per_worker, key=lambda pid: per_worker[pid])
    assert victim in worker_pids(master.pid)
    os.kill(victim, signal.SIGKILL)
    wait_for_workers(master.pid, 2, other_than={victim})
    wait_until_serving(master, int(base.rpartition(":")[2]))
    after_kill = scrape(base)
    assert echo_calls(after_kill) == sent
    assert after_kill[grants] == 5

    more = sum(1 for _ in range(10) if tool_call(base, token) == 200)
    assert echo_calls(scrape(base)) == sent + more == sent + 10
    assert calls_by_pid(directory)[victim] == per_worker[victim]  # the dead worker's file is kept as it was
