"""``make serve``'s stop timing (project/serve.py ``stop_timeouts``, ``commands``): the drain of
``SERVE_DRAIN_SECONDS`` reaches the workers as ``MCP_DRAIN_DELAY_SECONDS``, gunicorn's graceful
timeout covers it plus what is in flight, and gunicorn runs the site's configuration file."""

from __future__ import annotations

import pytest

from project.serve import commands, environment, stop_timeouts


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
