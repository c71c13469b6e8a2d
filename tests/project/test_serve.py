"""project/serve.py, the parts that need no running server: the secrets kept in SERVE_SECRETS_DIR
(one file, whole, even when hosts make it at once), where each secret came from, SERVE_BEAT=0, and
the stop timing (``stop_timeouts``, ``commands``): the drain of ``SERVE_DRAIN_SECONDS`` reaches the
workers as ``MCP_DRAIN_DELAY_SECONDS``, gunicorn's graceful timeout covers it plus what is in flight,
and gunicorn runs the site's configuration file. The prepare step with real processes:
tests/topology/test_fleet_prepare.py."""

from __future__ import annotations

import multiprocessing
import stat

import pytest

from project import serve
from project.serve import commands, environment, stop_timeouts

BASE = {
    "MCP_BASE_URL": "http://127.0.0.1:8000",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "HOST": "127.0.0.1",
    "PORT": "8000",
}


def _make(directory: str, queue) -> None:
    queue.put(serve._kept_secret("serve-secret-key", lambda: serve.secrets.token_urlsafe(50), serve.Path(directory)))


def test_hosts_making_the_secret_at_once_all_read_the_one_linked_first(tmp_path):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    workers = [context.Process(target=_make, args=(str(tmp_path), queue)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    values = {queue.get(timeout=5) for _ in workers}
    assert len(values) == 1 and len(values.pop()) >= 60
    assert [p.name for p in tmp_path.iterdir()] == ["serve-secret-key"]  # no file left aside
    assert stat.S_IMODE((tmp_path / "serve-secret-key").stat().st_mode) == 0o600


def test_secrets_come_from_the_environment_or_the_shared_directory(tmp_path):
    before = {**BASE, "DJANGO_SECRET_KEY": "from-env-" + "k" * 40, "SERVE_SECRETS_DIR": str(tmp_path)}
    env = serve.with_secrets(before)
    assert env["DJANGO_SECRET_KEY"] == "from-env-" + "k" * 40
    assert env["MCP_REQUEST_STATE_KEYS"] == (tmp_path / "request-state-keys").read_text().strip()
    assert env["ELICITATION_ENCRYPTION_KEYS"] == (tmp_path / "elicitation-keys").read_text().strip()
    assert not (tmp_path / "serve-secret-key").exists()
    assert serve.with_secrets(before) == env  # a second host reading the same directory
    assert serve.secret_sources(before) == [
        "DJANGO_SECRET_KEY: from the environment",
        f"ELICITATION_ENCRYPTION_KEYS: from {tmp_path / 'elicitation-keys'} (SERVE_SECRETS_DIR)",
        f"MCP_REQUEST_STATE_KEYS: from {tmp_path / 'request-state-keys'} (SERVE_SECRETS_DIR)",
    ]


def test_a_secret_made_on_this_machine_says_every_host_needs_the_same():
    (line,) = [s for s in serve.secret_sources(dict(BASE)) if s.startswith("MCP_REQUEST_STATE_KEYS")]
    assert line == (
        f"MCP_REQUEST_STATE_KEYS: from {serve.LOCAL / 'request-state-keys'}, made on this machine; every host "
        "needs the same (set MCP_REQUEST_STATE_KEYS, or SERVE_SECRETS_DIR to a directory all hosts share)"
    )


def test_serve_beat_0_starts_no_beat_and_the_banner_says_so(tmp_path):
    env = {**BASE, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x"}
    assert [name for name, _, _ in serve.commands(env)] == ["web", "celery-worker", "celery-beat"]
    assert "Celery worker + beat on" in serve.banner(env)
    off = {**env, "SERVE_BEAT": "0"}
    assert [name for name, _, _ in serve.commands(off)] == ["web", "celery-worker"]
    assert "Celery worker (no beat: SERVE_BEAT=0) on" in serve.banner(off)
    schedule = {**env, "SERVE_BEAT_SCHEDULE_FILE": str(tmp_path / "beat")}
    (beat,) = [argv for name, argv, _ in serve.commands(schedule) if name == "celery-beat"]
    assert beat[-2:] == ["-s", str(tmp_path / "beat")]


def web(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    [(argv, web_env)] = [(argv, spec_env) for name, argv, spec_env in commands(env) if name == "web"]
    return argv, web_env


def test_the_default_drain(monkeypatch):
    monkeypatch.delenv("SERVE_DRAIN_SECONDS", raising=False)
    monkeypatch.delenv("MCP_DRAIN_DELAY_SECONDS", raising=False)
    assert stop_timeouts({}) == (5.0, 15.0, 20.0)
    argv, web_env = web(environment())
    assert argv[argv.index("--graceful-timeout") + 1] == "15"
    assert argv[argv.index("-c") + 1] == "python:project.gunicorn_config"
    assert web_env["MCP_DRAIN_DELAY_SECONDS"] == "5"


def test_serve_drain_seconds_sets_the_workers_delay_and_the_timeouts(monkeypatch):
    monkeypatch.setenv("SERVE_DRAIN_SECONDS", "12.5")
    monkeypatch.delenv("MCP_DRAIN_DELAY_SECONDS", raising=False)
    env = environment()
    assert stop_timeouts(env) == (12.5, 22.5, 27.5)
    argv, web_env = web(env)
    assert (argv[argv.index("--graceful-timeout") + 1], web_env["MCP_DRAIN_DELAY_SECONDS"]) == ("22.5", "12.5")
    celery = [spec_env for name, _, spec_env in commands(env) if name == "celery-worker"][0]
    assert "MCP_DRAIN_DELAY_SECONDS" not in celery


def test_a_delay_set_for_the_workers_is_kept(monkeypatch):
    monkeypatch.setenv("MCP_DRAIN_DELAY_SECONDS", "2")
    assert web(environment())[1]["MCP_DRAIN_DELAY_SECONDS"] == "2"


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_drain_that_is_not_seconds_is_refused(value):
    with pytest.raises(ValueError, match="SERVE_DRAIN_SECONDS must be a number of seconds of at least 0"):
        stop_timeouts({"SERVE_DRAIN_SECONDS": value})


def test_the_banner_command_runs_manage_py_at_the_sites_base_url():
    """Without MCP_BASE_URL, an organization saved from a copied ``manage.py shell`` of a server on
    port 8602 moved its endpoint to http://127.0.0.1:8000/mcp/o/<slug>, and the server's URL answered 404."""
    env = {"MCP_BASE_URL": "http://127.0.0.1:8602", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}
    shown = serve.banner({**env, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/mcp_authz"})
    assert "DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcp_authz MCP_BASE_URL=http://127.0.0.1:8602 " in shown
    assert serve.manage_py_environment({**env, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x"}) == (
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/x MCP_BASE_URL=http://127.0.0.1:8602"
    )


def test_the_banner_counts_one_worker_in_the_singular():
    env = {"MCP_BASE_URL": "http://127.0.0.1:8602", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}
    base = {**env, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/mcp_authz"}
    assert "(1 ASGI worker, pool 8 each;" in serve.banner({**base, "WORKERS": "1"})
    assert "(2 ASGI workers, pool 8 each;" in serve.banner(base)
