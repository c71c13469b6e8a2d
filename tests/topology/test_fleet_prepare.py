"""Many hosts started at once: ``python -m project.serve prepare`` (what ``make serve`` runs before
starting a thing) in N real processes released at the same instant, against a database that does
not exist yet and against an existing empty one. Every process succeeds; the database is created
once and migrated once (one process applies every migration under the advisory lock, the others find
nothing left); the fleet's secrets are recorded once.

Without the locks, the issue measured 7 of 7 simultaneous starts with one host dead
(``UniqueViolation … pg_database_datname_index``, ``IntegrityError … pg_type_typname_nsp_index``).

Also ``SERVE_MIGRATE=0`` (a deployment that migrates in a step of its own): prepare leaves the
database alone, and refuses to start while the schema is missing.

Skipped unless the test database is PostgreSQL (tests/support/topology.py).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from cryptography.fernet import Fernet

from tests.support.topology import database_url, require_postgres_and_redis

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
HOSTS = 4
#: Each process imports project.serve first, then waits for the common instant (argv[1], epoch seconds).
AT_ONCE = (
    "import sys, time; import project.serve as serve; "
    "time.sleep(max(0.0, float(sys.argv[1]) - time.time())); sys.exit(serve.main(sys.argv[2:]))"
)
SHARED = {
    "DJANGO_SECRET_KEY": "fleet-prepare-" + "k" * 40,
    "ELICITATION_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    "MCP_REQUEST_STATE_KEYS": "fleet-prepare-state-" + "s" * 32,
}


def admin_url() -> str:
    parts = urlsplit(database_url())
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", "", ""))


def url_of(name: str) -> str:
    parts = urlsplit(database_url())
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def drop(name: str) -> None:
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_name(db) -> Iterator[str]:
    """A database of the test's own (``DATABASE_URL``'s name, ``_fleet_`` and a random suffix),
    dropped at the end."""
    require_postgres_and_redis()
    base = urlsplit(os.environ.get("DATABASE_URL", "")).path.lstrip("/") or urlsplit(database_url()).path.lstrip("/")
    name = f"{base}_fleet_{secrets.token_hex(4)}"
    drop(name)
    yield name
    drop(name)


def host_environment(name: str, tmp_path: Path, index: int, **extra: str) -> dict[str, str]:
    """A host's environment: the documented variables, the shared secrets, its own static root."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    return {
        **{key: os.environ[key] for key in keep if key in os.environ},
        "DATABASE_URL": url_of(name),
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_STATIC_ROOT": str(tmp_path / f"static-{index}"),
        "SERVE_SECRETS_DIR": str(tmp_path / f"secrets-{index}"),
        "PYTHONUNBUFFERED": "1",
        **SHARED,
        **extra,
    }


def prepare_at_once(name: str, tmp_path: Path, hosts: int = HOSTS, **extra: str) -> list[subprocess.CompletedProcess]:
    """``hosts`` prepare processes released at the same instant; their outcomes once all exited."""
    instant = time.time() + 4.0  # time for every interpreter to import project.serve
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", AT_ONCE, str(instant), "prepare"],
            cwd=ROOT,
            env=host_environment(name, tmp_path, index, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(hosts)
    ]
    done = []
    for process in processes:
        out, err = process.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def migrate_events(outcomes: list[subprocess.CompletedProcess]) -> list[dict]:
    events = []
    for outcome in outcomes:
        lines = [
            json.loads(line) for line in outcome.stdout.splitlines() if line.startswith('{"event": "serve.migrate"')
        ]
        assert len(lines) == 1, outcome.stdout
        events.extend(lines)
    return events


def schema_facts(name: str) -> tuple[int, int, int]:
    """(rows of django_migrations, distinct (app, name) among them, rows of mcp_oauth_fleetsecret)."""
    with psycopg.connect(url_of(name)) as conn:
        rows, distinct = conn.execute("SELECT count(*), count(DISTINCT (app, name)) FROM django_migrations").fetchone()
        fleet = conn.execute("SELECT count(*) FROM mcp_oauth_fleetsecret").fetchone()[0]
    return rows, distinct, fleet


def assert_migrated_once(name: str, outcomes: list[subprocess.CompletedProcess]) -> None:
    for outcome in outcomes:
        assert outcome.returncode == 0, outcome.stderr[-3000:]
    rows, distinct, fleet = schema_facts(name)
    assert rows == distinct and rows > 50
    applied = sorted(event["applied"] for event in migrate_events(outcomes))
    assert applied == [0] * (len(outcomes) - 1) + [rows]  # one host migrated everything, the others nothing
    assert fleet == 3  # SECRET_KEY, the requestState ring, the Fernet ring: recorded once, matched by the others
    recorded = [o.stdout.count(": recorded (") for o in outcomes]
    assert sorted(recorded) == [0] * (len(outcomes) - 1) + [3]
    for outcome in outcomes:
        assert "DJANGO_SECRET_KEY: from the environment" in outcome.stdout


def test_hosts_started_at_once_against_a_missing_database_all_succeed(database_name, tmp_path):
    outcomes = prepare_at_once(database_name, tmp_path)
    created = [o.stdout.count(f"created database {database_name}") for o in outcomes]
    assert sorted(created) == [0] * (HOSTS - 1) + [1]
    assert_migrated_once(database_name, outcomes)


def test_hosts_started_at_once_against_an_existing_empty_database_all_succeed(database_name, tmp_path):
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database_name}"')
    outcomes = prepare_at_once(database_name, tmp_path)
    assert not any("created database" in o.stdout for o in outcomes)
    assert_migrated_once(database_name, outcomes)


def test_serve_migrate_0_leaves_the_database_to_a_step_of_its_own(database_name, tmp_path):
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database_name}"')
    refused = prepare_at_once(database_name, tmp_path, hosts=1, SERVE_MIGRATE="0")[0]
    assert refused.returncode == 3
    assert "run manage.py migrate first" in refused.stderr
    assert "prepare failed (manage.py check_fleet_config, exit status 1): not starting." in refused.stderr
    assert "serve.migrate" not in refused.stdout
    # the deployment's own step, then the hosts
    env = host_environment(database_name, tmp_path, 9)
    subprocess.run(
        [sys.executable, "-m", "project.serve", "migrate"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    outcomes = prepare_at_once(database_name, tmp_path, hosts=2, SERVE_MIGRATE="0")
    for outcome in outcomes:
        assert outcome.returncode == 0, outcome.stderr[-3000:]
        assert "serve.migrate" not in outcome.stdout
    assert schema_facts(database_name)[2] == 3
