"""``make serve`` supervises its processes (project/serve.py, :class:`project.serve.Supervisor`).

* A child that exits is started again after a backoff that doubles while it keeps dying (capped),
  with one JSON log line per restart; the others are left running; :meth:`terminate` stops all.
* With real processes (the production topology of tests/topology/test_serve_operator.py, PostgreSQL and
  Redis): SIGKILL to the Celery worker, to beat, to a gunicorn web worker and to gunicorn's master,
  one at a time: ``/mcp`` keeps answering (the Celery kills) and the killed process is back within
  10 s (the figure is printed); SIGTERM to serve then still stops everything.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time

import httpx2
import pytest

from project.serve import BACKOFF_FIRST, BACKOFF_MAX, Supervisor
from tests.topology.test_serve_operator import command_line, fresh_tree, running_topology, session_pids

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
DIES = [sys.executable, "-c", "raise SystemExit(3)"]


def test_a_dead_child_is_restarted_with_backoff_and_one_log_line_each_time():
    log = io.StringIO()
    supervisor = Supervisor([("steady", SLEEPER, dict(os.environ)), ("crashy", DIES, dict(os.environ))], log=log)
    supervisor.start()
    steady_pid = supervisor.process("steady").pid
    try:
        now = supervisor.children["crashy"].started_at
        supervisor.process("crashy").wait(timeout=10)
        delays = []
        for _ in range(9):  # each exit: a line, then a restart once the backoff has passed
            supervisor.poll(now)
            record = json.loads(log.getvalue().splitlines()[-1])
            delays.append(record["backoff_seconds"])
            now += record["backoff_seconds"]
            supervisor.poll(now)  # started again
            supervisor.process("crashy").wait(timeout=10)
        lines = [json.loads(line) for line in log.getvalue().splitlines()]
        assert len(lines) == 9
        assert {line["event"] for line in lines} == {"serve.restart"}
        assert {line["process"] for line in lines} == {"crashy"}
        assert {line["exit_status"] for line in lines} == {3}
        assert [line["restarts"] for line in lines] == list(range(1, 10))
        assert delays == [BACKOFF_FIRST * 2**n for n in range(6)] + [BACKOFF_MAX] * 3
        assert supervisor.process("steady").pid == steady_pid and supervisor.process("steady").poll() is None
    finally:
        supervisor.stop()
        supervisor.terminate(grace=5)
    assert supervisor.process("steady").poll() is not None


def test_after_a_stable_run_the_backoff_starts_again_from_the_first_delay():
    log = io.StringIO()
    supervisor = Supervisor([("crashy", DIES, dict(os.environ))], log=log)
    supervisor.start()
    child = supervisor.children["crashy"]
    child.backoff = BACKOFF_MAX
    child.started_at = time.monotonic() - 60  # it ran a minute before it died
    supervisor.process("crashy").wait(timeout=10)
    supervisor.poll()
    assert json.loads(log.getvalue())["backoff_seconds"] == BACKOFF_FIRST
    supervisor.terminate(grace=1)


# --- real processes ------------------------------------------------------------------------


def roles(sid: int) -> dict[str, list[int]]:
    """pid lists of the topology's processes by role (main processes only for Celery)."""
    found: dict[str, list[int]] = {"master": [], "web-worker": [], "celery-worker": [], "celery-beat": []}
    for pid in session_pids(sid):
        line = command_line(pid)
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if "gunicorn" in line:
            found["master" if parent == sid else "web-worker"].append(pid)
        elif "celery" in line and " worker " in line and parent == sid:
            found["celery-worker"].append(pid)
        elif "celery" in line and " beat " in line:
            found["celery-beat"].append(pid)
    return found


class Prober(threading.Thread):
    """GET /mcp without a token every 50 ms: 401 is an answer; anything else is counted."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base, self.stop, self.answers, self.failures = base, threading.Event(), 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                status = httpx2.post(self.base + "/mcp", json={}, timeout=5).status_code
                if status == 401:
                    self.answers += 1
                else:
                    self.failures.append(status)
            except httpx2.HTTPError as exc:
                self.failures.append(type(exc).__name__)
            time.sleep(0.05)


def back_within(topology, role: str, killed: int, expected: int, timeout: float = 10) -> float:
    """Seconds until ``role`` has ``expected`` processes again, none of them ``killed``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pids = roles(topology.process.pid)[role]
        if killed not in pids and len(pids) == expected:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(
        f"{role} not back within {timeout} s: {roles(topology.process.pid)}\n{topology.output()[-3000:]}"
    )


@pytest.mark.e2e
def test_killed_processes_come_back_and_the_web_tier_keeps_answering(tmp_path_factory):
    tree = fresh_tree(tmp_path_factory.mktemp("supervised-tree"))
    with running_topology(tree, DJANGO_INSECURE_LOOPBACK_HTTP="1") as topology:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = roles(topology.process.pid)
            if all(found[r] for r in ("master", "celery-worker", "celery-beat")) and len(found["web-worker"]) == 2:
                break
            time.sleep(0.2)
        figures = {}
        prober = Prober(topology.backend)
        prober.start()
        try:
            for role, expected in (("celery-worker", 1), ("celery-beat", 1), ("web-worker", 2)):
                victim = roles(topology.process.pid)[role][0]
                before = prober.answers
                os.kill(victim, signal.SIGKILL)
                figures[role] = back_within(topology, role, victim, expected)
                time.sleep(0.5)
                assert prober.answers > before, role  # /mcp answered meanwhile
            failures_before_master = list(prober.failures)
            master = roles(topology.process.pid)["master"][0]
            os.kill(master, signal.SIGKILL)
            figures["master"] = back_within(topology, "master", master, 1)
            # the orphaned workers of the killed master leave; the new master starts two of its own
            started = time.monotonic()
            while True:
                try:
                    if httpx2.post(topology.backend + "/mcp", json={}, timeout=2).status_code == 401:
                        break
                except httpx2.HTTPError:
                    pass
                assert time.monotonic() - started < 20, topology.output()[-3000:]
                time.sleep(0.1)
            figures["master, answering again"] = figures["master"] + time.monotonic() - started
        finally:
            prober.stop.set()
            prober.join(timeout=10)
        print("\nback within (s):", {k: round(v, 2) for k, v in figures.items()})
        assert failures_before_master == [], failures_before_master  # the Celery and web-worker kills: no failure
        output = topology.output()
        restarts = [json.loads(line) for line in output.splitlines() if line.startswith('{"event": "serve.restart"')]
        assert [r["process"] for r in restarts] == ["celery-worker", "celery-beat", "web"], output[-3000:]
        assert all(r["exit_status"] == -signal.SIGKILL for r in restarts)
        assert all(seconds < 10 for seconds in figures.values()), figures
        assert topology.stop() == 0
    assert session_pids(topology.process.pid) == []
