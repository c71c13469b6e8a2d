"""run.py's baseline check of the suite's authorization-server scenarios (the suite's ``authorization``
command takes no expected-failures file, so run.py applies the suite's own rules to ``checks.json``)."""

from __future__ import annotations

from tests.conformance import run

SCENARIOS = ["authorization-server-metadata-endpoint", "authorization-code-grant"]
PASSING = {"authorization-server-metadata-endpoint": {"SUCCESS": 2}, "authorization-code-grant": {"SUCCESS": 1}}


def _baseline(tmp_path, monkeypatch, text: str | None) -> None:
    monkeypatch.setattr(run, "HERE", tmp_path)
    if text is not None:
        (tmp_path / "baseline-authorization-2026-07-28.yml").write_text(text)


def test_the_committed_baselines_list_no_failure():
    for era in run.SUITES:
        assert run.read_baseline(run.HERE / f"baseline-authorization-{era}.yml") == set()


def test_every_scenario_passing_with_an_empty_baseline_passes(tmp_path, monkeypatch, capsys):
    _baseline(tmp_path, monkeypatch, "# reasons\nauthorization: []\n")
    assert run.check_authorization_baseline("2026-07-28", SCENARIOS, PASSING) == 0
    assert capsys.readouterr().out == ""


def test_a_failure_a_warning_a_skip_or_a_missing_result_not_listed_fails(tmp_path, monkeypatch, capsys):
    _baseline(tmp_path, monkeypatch, "authorization: []\n")
    for bad in ({"SUCCESS": 1, "FAILURE": 1}, {"SUCCESS": 1, "WARNING": 1}, {"SKIPPED": 1}, {}):
        summary = {**PASSING, "authorization-code-grant": bad}
        assert run.check_authorization_baseline("2026-07-28", SCENARIOS, summary) == 1
        assert "unexpected failure (not in baseline-authorization-2026-07-28.yml): authorization-code-grant" in (
            capsys.readouterr().out
        )


def test_a_listed_failure_is_expected_and_a_listed_pass_is_stale(tmp_path, monkeypatch, capsys):
    _baseline(tmp_path, monkeypatch, "authorization:\n  - authorization-code-grant  # the reason\n")
    failing = {**PASSING, "authorization-code-grant": {"FAILURE": 1}}
    assert run.check_authorization_baseline("2026-07-28", SCENARIOS, failing) == 0
    assert run.check_authorization_baseline("2026-07-28", SCENARIOS, PASSING) == 1
    assert "stale baseline entry" in capsys.readouterr().out


def test_no_scenario_listed_by_the_suite_fails(tmp_path, monkeypatch):
    _baseline(tmp_path, monkeypatch, None)
    assert run.check_authorization_baseline("2026-07-28", [], {}) == 1


def test_result_directories_of_both_commands_name_their_scenario(tmp_path):
    for name in ("server-ping-2026-12-07T19-42-27-687Z", "authorization-server-authorization-code-grant-2026-12-07T19-42-36-548Z"):  # fmt: skip
        (tmp_path / name).mkdir()
        (tmp_path / name / "checks.json").write_text('[{"status": "SUCCESS"}, {"status": "INFO"}]')
    assert run.summarize(tmp_path) == {"ping": {"SUCCESS": 1, "INFO": 1}, "authorization-code-grant": {"SUCCESS": 1, "INFO": 1}}  # fmt: skip


def test_without_chromium_the_approval_fails_with_how_to_install_it(tmp_path, monkeypatch):
    import pytest

    from tests.conformance import user_agent

    monkeypatch.setattr(user_agent, "CHROMIUM", str(tmp_path / "no-chromium"))
    with pytest.raises(user_agent.ApprovalFailed, match="apt-get install chromium"):
        user_agent.approve(
            "http://127.0.0.1:9/oauth/authorize",
            username="u",
            password="p",
            callback_prefix="http://127.0.0.1:9/callback",
            evidence=tmp_path,
        )
