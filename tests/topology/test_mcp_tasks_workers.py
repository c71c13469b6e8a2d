"""The Tasks extension across real processes: uvicorn serving the site, Celery workers (prefork)
on the test's Redis database (``TEST_REDIS_URL``), clients in other
processes, on the test's PostgreSQL database.

* a task started by one client process, which then goes away, is polled to its result by
  another process; input through ``tasks/update``; cancel; another user gets "unknown task";
* the Celery workers are killed (SIGKILL, the whole process group) mid-task and the web worker
  is killed while clients poll: every task completes once (N tasks, 0 lost, 0 duplicated;
  ``MCP_TASKS_KILL_N`` sets N, default 6; ``-s`` prints the figures);
* an ``async def`` tool that blocks its event loop (``time.sleep``) longer than the lease keeps
  it (the heartbeat is a thread) and runs once; a worker frozen (SIGSTOP) past the lease loses the
  task to another worker and, resumed, writes nothing (issue #28).

Skipped without PostgreSQL and Redis.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import redis

from mcp_oauth.models import McpTask
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.task_client import poll, request
from tests.support.topology import REDIS_URL, require_postgres_and_redis
from tests.support.workers import start_uvicorn, stop, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
#: The broker: the test's Redis database (``TEST_REDIS_URL``); only Celery's keys are cleared.
BROKER = REDIS_URL
TUNING = {
    "TOOL_MODULES": ["tests.support.task_tools"],
    "TASKS_HEARTBEAT_SECONDS": 0.5,
    "TASKS_LEASE_SECONDS": 3,
    "TASKS_QUEUE_GRACE_SECONDS": 4,
    "TASKS_CANCEL_POLL_SECONDS": 0.2,
    "TASKS_POLL_INTERVAL_MS": 200,
}


@pytest.fixture
def site(settings, tmp_path):
    """``(port, mcp url, environment of the site's processes, run log)``; Celery's queue emptied first."""
    require_postgres_and_redis()
    clear_queue()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    env = worker_env(
        base,
        "tasks-" + secrets.token_hex(4),
        DJANGO_SETTINGS_MODULE="tests.support.worker_settings",
        CELERY_BROKER_URL=BROKER,
        TEST_WORKER_MCP_OAUTH=json.dumps(TUNING),
        MCP_TASKS_RUN_LOG=str(tmp_path / "runs.log"),
        DB_POOL_MAX_SIZE="4",
    )
    ensure_default_resource()
    yield port, f"{base}/mcp", env, tmp_path / "runs.log"
    clear_queue()


def clear_queue() -> None:
    """Delete the Celery queue and kombu's bookkeeping from the broker (nothing else there)."""
    client = redis.Redis.from_url(BROKER)
    keys = [*client.keys("celery*"), *client.keys("_kombu*"), *client.keys("unacked*")]
    if keys:
        client.delete(*keys)


@contextmanager
def celery_worker(env: dict[str, str], name: str, concurrency: int = 3):
    """A Celery worker (prefork) in a process group of its own; killed with the group at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "project", "worker", "-P", "prefork", "-c", str(concurrency)]
        + ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning", "-n", f"{name}@%h"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        kill_group(process)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process and every child of it (a worker dying mid-task, not a warm shutdown)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def create(url: str, token: str, name: str, arguments: dict) -> dict:
    response = request(url, token, "tools/call", {"name": name, "arguments": arguments})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "task", result
    return result


def poll_in_another_process(url: str, token: str, task_id: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.task_client", url, token, task_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(out.stdout)


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_task_outlives_its_client_and_is_polled_from_another_process(site, user, other_user, public_app, mint_token):
    port, url, env, runs = site
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    intruder = mint_token(other_user, public_app, "mcp", resource.uri)
    server = start_uvicorn(port, env)
    try:
        with celery_worker(env, "e2e"):
            # 3 s in CI; the 30-second tool: MCP_TASKS_E2E_SECONDS=30
            seconds = float(os.environ.get("MCP_TASKS_E2E_SECONDS", "3"))
            created = create(url, token, "long_job", {"seconds": seconds, "label": "report"})
            task_id = created["taskId"]
            # durable at once, and owned: an immediate tasks/get finds it; another user does not
            assert request(url, token, "tasks/get", {"taskId": task_id}).json()["result"]["taskId"] == task_id
            foreign = request(url, intruder, "tasks/get", {"taskId": task_id})
            assert foreign.status_code == 400
            assert foreign.json()["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
            # the creating client is gone; another process picks the task up by its id
            done = poll_in_another_process(url, token, task_id)
            assert done["status"] == "completed"
            assert done["result"]["content"] == [{"type": "text", "text": f"report done by {task_id}"}]
            assert McpTask.objects.get(task_id=task_id).attempts == 1

            # input through tasks/update
            asking = create(url, token, "ask_job", {"filename": "a.txt"})["taskId"]
            assert wait_for(
                lambda: (
                    request(url, token, "tasks/get", {"taskId": asking}).json()["result"]["status"] == "input_required"
                )
            )
            asked = request(url, token, "tasks/get", {"taskId": asking}).json()["result"]
            assert list(asked["inputRequests"]) == ["confirm"]
            assert asked["inputRequests"]["confirm"]["params"]["message"] == "Delete a.txt?"
            ack = request(
                url,
                token,
                "tasks/update",
                {"taskId": asking, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}},
            )
            assert ack.json()["result"]["resultType"] == "complete"
            answered = poll(url, token, asking)
            assert answered["result"]["content"] == [{"type": "text", "text": "deleted a.txt"}]

            # cancel reaches the tool running on the worker
            long = create(url, token, "long_job", {"seconds": 60, "label": "cancel-me"})["taskId"]
            assert wait_for(lambda: McpTask.objects.get(task_id=long).lease != "")
            assert request(url, token, "tasks/cancel", {"taskId": long}).json()["result"]["resultType"] == "complete"
            assert poll(url, token, long)["status"] == "cancelled"
            # a request without the extension may not touch tasks
            bare = request(url, token, "tasks/get", {"taskId": task_id}, caps={})
            assert (bare.status_code, bare.json()["error"]["code"]) == (400, -32021)
    finally:
        stop(server)
    assert runs.read_text().split() == [task_id, "report"]


def test_killing_celery_workers_mid_task_and_the_web_worker_while_polling_loses_nothing(
    site, user, public_app, mint_token
):
    port, url, env, runs = site
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    n = int(os.environ.get("MCP_TASKS_KILL_N", "6"))
    server = start_uvicorn(port, env)
    try:
        with celery_worker(env, "doomed") as doomed:
            ids = [create(url, token, "long_job", {"seconds": 2.5, "label": f"job{i}"})["taskId"] for i in range(n)]
            # kill every worker process while tasks run (and the rest wait in its prefetch)
            assert wait_for(lambda: McpTask.objects.filter(task_id__in=ids).exclude(lease="").count() >= 2)
            running = set(McpTask.objects.filter(task_id__in=ids).exclude(lease="").values_list("task_id", flat=True))
            kill_group(doomed)
        # the web worker dies too, while nothing polls; a new one takes its port
        server.kill()
        server.wait(timeout=10)
        server = start_uvicorn(port, env)
        with celery_worker(env, "rescuer"):
            finals = {task_id: poll(url, token, task_id, timeout=120) for task_id in ids}
    finally:
        stop(server)
    completed = [t for t, final in finals.items() if final.get("status") == "completed"]
    lost = n - len(completed)
    lines = runs.read_text().splitlines()
    per_task = {task_id: sum(line.split()[0] == task_id for line in lines) for task_id in ids}
    duplicated = sum(count - 1 for count in per_task.values() if count > 1)
    print(
        f"\nMCP tasks under worker kills: {n} tasks, {len(running)} killed mid-run, "
        f"{lost} lost, {duplicated} duplicated results"
    )
    assert lost == 0 and duplicated == 0
    assert all(count == 1 for count in per_task.values()), per_task
    for task_id in ids:
        label = finals[task_id]["result"]["content"][0]["text"].split()[0]
        assert finals[task_id]["result"]["content"] == [{"type": "text", "text": f"{label} done by {task_id}"}]
    attempts = dict(McpTask.objects.filter(task_id__in=ids).values_list("task_id", "attempts"))
    assert all(attempts[task_id] == 2 for task_id in running), attempts


def test_an_async_tool_blocking_its_loop_longer_than_the_lease_completes_once(site, user, public_app, mint_token):
    """Issue #28: the heartbeat ran on the tool's own event loop, so an ``async def`` tool that
    blocked it (``time.sleep``) for longer than ``TASKS_LEASE_SECONDS`` (3 s here) was declared
    lost while its worker was healthy, its result dropped, and (``max_retries=1``) a second copy
    started beside it. The lease is renewed by a thread now: the task completes with its own
    result, on its first attempt, and the tool started exactly once."""
    port, url, env, runs = site
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    server = start_uvicorn(port, env)
    try:
        with celery_worker(env, "blocker"):
            ids = [
                create(url, token, "blocking_job", {"seconds": 7, "label": f"blocked{i}"})["taskId"] for i in range(2)
            ]
            # tasks/get runs the reconciler for an overdue task: poll all along, as a client does
            finals = {task_id: poll(url, token, task_id, timeout=60) for task_id in ids}
    finally:
        stop(server)
    lines = runs.read_text().splitlines()
    for i, task_id in enumerate(ids):
        assert finals[task_id]["status"] == "completed", finals[task_id]
        assert finals[task_id]["result"]["content"] == [
            {"type": "text", "text": f"blocked{i} done by {task_id} on attempt 1"}
        ]
        starts = [line.split() for line in lines if line.startswith(f"start {task_id} ")]
        ends = [line.split() for line in lines if line.startswith(f"end {task_id} ")]
        assert len(starts) == 1, lines
        assert starts[0][2] == "1" and len(starts[0][3]) == 64
        assert ends == [["end", task_id, "1", "True"]], lines
        row = McpTask.objects.get(task_id=task_id)
        assert (row.attempts, row.status, row.lease) == (1, "completed", "")


def test_a_frozen_worker_that_resumes_after_its_task_was_given_away_writes_nothing(site, user, public_app, mint_token):
    """The other side of the lease: a worker that really stops renewing it (SIGSTOP, longer than
    the lease) loses the task to another worker (``max_retries=1``); when it resumes, its run
    learns it lost the lease (cancelled at its next ``await``, or ``holds_lease()`` False when its
    own await wins the race with the heartbeat thread's cancellation) and nothing of it is stored:
    one result, the second attempt's."""
    port, url, env, runs = site
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    server = start_uvicorn(port, env)
    try:
        with celery_worker(env, "frozen", concurrency=1) as frozen:
            task_id = create(url, token, "blocking_job", {"seconds": 2, "label": "frozen"})["taskId"]
            # a worker starting beside a loaded suite may take long to pick it up: a generous bound
            assert wait_for(lambda: McpTask.objects.get(task_id=task_id).lease != "", timeout=120)
            os.killpg(frozen.pid, signal.SIGSTOP)
            try:
                with celery_worker(env, "thawed", concurrency=1):
                    # tasks/get heals the overdue task: it goes to the live worker (which starts
                    # now, beside a loaded suite: the same generous bound)
                    assert wait_for(
                        lambda: (
                            request(url, token, "tasks/get", {"taskId": task_id}).json()["result"]["status"]
                            and McpTask.objects.get(task_id=task_id).attempts == 2
                        ),
                        timeout=120,
                    )
                    os.killpg(frozen.pid, signal.SIGCONT)
                    final = poll(url, token, task_id, timeout=60)
                    # a warm shutdown waits for the resumed run to finish: whatever it would write is
                    # written before the assertions (a fixed sleep could end first on a loaded machine)
                    frozen.send_signal(signal.SIGTERM)
                    frozen.wait(timeout=120)
            finally:
                with suppress(ProcessLookupError):
                    os.killpg(frozen.pid, signal.SIGCONT)
    finally:
        stop(server)
    assert final["status"] == "completed", final
    assert final["result"]["content"] == [{"type": "text", "text": f"frozen done by {task_id} on attempt 2"}]
    lines = [line.split() for line in runs.read_text().splitlines() if line.split()[1] == task_id]
    starts = [line for line in lines if line[0] == "start"]
    ends = [line for line in lines if line[0] == "end"]
    # by attempt, not by line order: the worker may be frozen after taking the lease and before its
    # tool logged its start, so the first run's line can come after the second's (or never, when the
    # run learns of the lost lease before the tool begins). Each run logs the attempt its own claim
    # wrote: two starts of attempt 2 are two runs of the second attempt (a resumed run that took the
    # new holder's lease from the row: the bug this caught), never a slow machine
    assert sorted(s[2] for s in starts) in (["1", "2"], ["2"]), lines
    assert len({s[3] for s in starts}) == 1  # one idempotency key for every attempt
    # the resumed first run learns it lost the lease: cancelled at its next await by the heartbeat
    # thread, or (when its own await comes first: a race) told False by holds_lease(); never True
    assert [e for e in ends if e[2] == "2"] == [["end", task_id, "2", "True"]], lines
    assert [e for e in ends if e[2] == "1"] in ([], [["end", task_id, "1", "False"]]), lines
    assert len(ends) <= 2, lines
    row = McpTask.objects.get(task_id=task_id)
    assert (row.status, row.attempts, row.lease) == ("completed", 2, "")
