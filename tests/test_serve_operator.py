"""The operator's path, end to end: ``make serve`` (``python -m project.serve``) on a fresh tree.

A copy of the project's files (no ``staticfiles/``, no ``.local/``) is started with only documented
variables and the http-on-loopback switch (``DJANGO_INSECURE_LOOPBACK_HTTP=1``, README "Run in
production"), WORKERS=2, on a PostgreSQL database of its own and Redis (``TEST_REDIS_URL``). Then:

* no demo account exists; an administrator is made the way the banner says
  (``createsuperuser --noinput`` with ``DJANGO_SUPERUSER_*``);
* the official MCP Python SDK client (``mcp`` 2.3.0) registers, signs in on the site's login page,
  consents, and calls tools over http on loopback, through the gunicorn workers;
* a spoofed ``X-Forwarded-Host`` / ``X-Forwarded-Proto`` changes neither the issuer nor the resource;
* in Chromium the admin's login page is styled (its CSS, hashed by ``collectstatic``, loads with
  200) and the administrator signs in;
* SIGTERM stops the topology: ``project.serve`` exits 0 and every process it started is gone,
  no connection to its database is left, and the database is dropped.

Skipped unless the test database is PostgreSQL and Redis answers (tests/topology.py).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import pytest

from .browser import chromium_path, open_chromium, shot
from .live import HeadlessBrowser, free_port
from .test_e2e_python_sdk import Live, MemoryStorage, make_provider, session_run, structured
from .topology import REDIS_URL, database_url, require_postgres_and_redis

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parent.parent
ADMIN, ADMIN_EMAIL, ADMIN_PASSWORD = "operator", "operator@example.com", "operator-password-e2e-7fQ"
#: The environment of this machine that is not the site's (the site reads only what the test gives it).
SYSTEM = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")


def fresh_tree(target: Path) -> Path:
    """The project's files as a clone has them (tracked and new, not ignored) copied to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target / "staticfiles").exists() and not (target / ".local").exists()
    return target


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (the topology runs in a session of its own)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return sorted(pids)


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def admin_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", "", ""))


@dataclass
class Topology:
    tree: Path
    env: dict[str, str]
    base: str
    port: int
    database: str
    process: subprocess.Popen
    log: Path
    stopped: list[int] = field(default_factory=list)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def manage(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.tree,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def query(self, sql: str) -> list[tuple]:
        with psycopg.connect(self.env["DATABASE_URL"]) as conn:
            return conn.execute(sql).fetchall()

    def stop(self) -> int:
        """SIGTERM to ``project.serve``; its exit status."""
        if not self.stopped:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            try:
                self.stopped.append(self.process.wait(timeout=60))
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.stopped.append(self.process.wait(timeout=10))
        return self.stopped[0]


def wait_until_serving(topology: Topology, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if topology.process.poll() is not None:
            raise AssertionError(f"project.serve exited with {topology.process.returncode}:\n{topology.output()}")
        try:
            if httpx2.get(topology.base + "/.well-known/oauth-protected-resource/mcp", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"the topology did not answer within {timeout} s:\n{topology.output()}")


def started_processes(topology: Topology, count: int, timeout: float = 60) -> list[str]:
    """The command lines of the topology's processes once there are ``count`` (the Celery
    worker's pool child starts after the site answers)."""
    deadline = time.monotonic() + timeout
    while len(session_pids(topology.process.pid)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return [command_line(pid) for pid in session_pids(topology.process.pid)]


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    require_postgres_and_redis()
    tree = fresh_tree(tmp_path_factory.mktemp("fresh-clone"))
    server = database_url().rsplit("/", 1)[0]
    name = database_url().rsplit("/", 1)[1].removeprefix("test_") + "_serve_" + secrets.token_hex(3)
    port = free_port()
    env = {k: os.environ[k] for k in SYSTEM if k in os.environ}
    env.update(
        {
            "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
            "DATABASE_URL": f"{server}/{name}",
            "REDIS_URL": REDIS_URL,
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "WORKERS": "2",
            "DB_POOL_MAX_SIZE": "2",
            "DB_POOL_MAX_SIZE_CELERY": "1",
            "CELERY_CONCURRENCY": "1",
        }
    )
    log = tree / "serve.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "project.serve"],
            cwd=tree,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Topology(tree, env, f"http://127.0.0.1:{port}", port, name, process, log)
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()
        leftover = session_pids(process.pid)
        for pid in leftover:  # only if a test failed before the SIGTERM test: never leave them
            os.kill(pid, signal.SIGKILL)
        with psycopg.connect(admin_url(env["DATABASE_URL"]), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()


def test_a_fresh_tree_is_served_with_static_files_and_no_demo_account(topology):
    manifest = topology.tree / "staticfiles" / "staticfiles.json"
    assert manifest.is_file(), topology.output()  # collectstatic ran in the fresh tree, before the workers
    secrets_kept = {"elicitation-keys", "request-state-keys", "serve-secret-key"}
    assert {p.name for p in (topology.tree / ".local").iterdir()} & secrets_kept == secrets_kept
    assert {oct((topology.tree / ".local" / name).stat().st_mode & 0o777) for name in secrets_kept} == {"0o600"}
    assert topology.query("SELECT username FROM auth_user") == []
    output = topology.output()
    assert "manage.py createsuperuser" in output and "DJANGO_SUPERUSER_PASSWORD" in output
    assert f"MCP server: {topology.base}/mcp" in output

    # The processes: serve, gunicorn and its 2 workers, the Celery worker and its 1 child, beat.
    roles = started_processes(topology, 7)
    assert sum("project.serve" in line for line in roles) == 1
    assert sum("gunicorn" in line for line in roles) == 3, roles
    assert sum(" worker " in line and "celery" in line for line in roles) == 2, roles
    assert sum(" beat " in line for line in roles) == 1, roles
    assert len(roles) == 7, roles

    created = topology.manage(
        "createsuperuser",
        "--noinput",
        DJANGO_SUPERUSER_USERNAME=ADMIN,
        DJANGO_SUPERUSER_EMAIL=ADMIN_EMAIL,
        DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert topology.query("SELECT username, is_superuser FROM auth_user") == [(ADMIN, True)]


def test_pages_answer_over_http_without_redirect_and_the_issuer_ignores_forwarded_headers(topology):
    login = httpx2.get(topology.base + "/admin/login/", timeout=10)
    assert login.status_code == 200
    assert "strict-transport-security" not in login.headers
    assert login.headers["set-cookie"].startswith("csrftoken=") and "Secure" not in login.headers["set-cookie"]
    spoofed = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https", "X-Forwarded-Port": "443"}
    metadata = httpx2.get(topology.base + "/.well-known/oauth-authorization-server", headers=spoofed, timeout=10)
    assert metadata.status_code == 200
    assert metadata.json()["issuer"] == topology.base
    assert metadata.json()["authorization_endpoint"] == topology.base + "/oauth/authorize"
    resource = httpx2.get(topology.base + "/.well-known/oauth-protected-resource/mcp", headers=spoofed, timeout=10)
    assert resource.json()["resource"] == topology.base + "/mcp"
    assert resource.json()["authorization_servers"] == [topology.base]
    challenge = httpx2.post(topology.base + "/mcp", headers=spoofed, json={}, timeout=10)
    assert challenge.status_code == 401
    assert (
        f'resource_metadata="{topology.base}/.well-known/oauth-protected-resource/mcp"'
        in (challenge.headers["www-authenticate"])
    )


def test_the_official_python_sdk_client_completes_oauth_and_calls_tools(topology):
    live = Live(base=topology.base, port=topology.port)
    storage = MemoryStorage()
    browser = HeadlessBrowser(topology.base, ADMIN, ADMIN_PASSWORD)

    async def scenario():
        try:
            return await session_run(live, make_provider(live, storage, browser), "auto", calls=2)
        finally:
            await browser.aclose()

    seen = asyncio.run(scenario())
    client_id = storage.client_info.client_id
    assert {"whoami", "echo"} <= {tool.name for tool in seen["tools"].tools}
    for result in seen["whoami"]:
        assert not result.is_error, result
        data = structured(result)
        assert (data["user"], data["client_id"]) == (ADMIN, client_id)
    assert "héllo" in seen["echo"].content[0].text
    assert any("/accounts/login/" in url for url in browser.visited)
    steps = [(method, path, status) for method, path, status in live.exchanges]
    for step in [
        ("POST", "/mcp", 401),
        ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", "/.well-known/oauth-authorization-server", 200),
        ("POST", "/oauth/register", 201),
        ("POST", "/oauth/token", 200),
        ("POST", "/mcp", 200),
    ]:
        assert step in steps, steps
    assert not [step for step in steps if step[2] in (301, 302, 308) or step[2] >= 500], steps
    assert topology.query(
        "SELECT u.username, a.registration_source FROM oauth2_provider_accesstoken t "
        "JOIN auth_user u ON u.id = t.user_id JOIN oauth2_provider_application a ON a.id = t.application_id"
    ) == [(ADMIN, "dcr")]


@pytest.mark.browser
def test_in_chromium_the_admin_login_is_styled_and_the_administrator_signs_in(topology, request):
    executable = chromium_path()
    styles: list[tuple[str, int, str]] = []

    async def scenario():
        async with open_chromium(executable, request.node.name) as chromium:
            page = await chromium.new_page()

            async def on_response(response):
                if response.request.resource_type == "stylesheet":
                    kind = (await response.all_headers()).get("content-type", "")
                    styles.append((response.url, response.status, kind))

            page.on("response", on_response)
            await page.goto(topology.base + "/admin/")
            login_path = urlsplit(page.url).path
            header_color = await page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
            await shot(page, "serve-admin-login")
            await page.fill("#id_username", ADMIN)
            await page.fill("#id_password", ADMIN_PASSWORD)
            async with page.expect_navigation():
                await page.click("form [type=submit]")
            await shot(page, "serve-admin-index")
            return login_path, header_color, urlsplit(page.url).path, await page.inner_text("#user-tools")

    login_path, header_color, after, user_tools = asyncio.run(scenario())
    assert login_path == "/admin/login/"
    base_css = [item for item in styles if "/static/admin/css/base." in item[0]]
    assert base_css, styles
    for url, status, kind in styles:
        assert url.startswith(topology.base + "/static/") and status == 200 and kind.startswith("text/css"), styles
    # collectstatic's manifest names: base.<hash>.css, not base.css
    assert not base_css[0][0].endswith("/static/admin/css/base.css"), base_css
    assert header_color not in ("rgba(0, 0, 0, 0)", "transparent")
    assert after == "/admin/"
    assert ADMIN.upper() in user_tools.upper()


def test_sigterm_stops_every_process_and_leaves_no_connection(topology):
    before = started_processes(topology, 7)
    assert len(before) == 7, before
    assert topology.stop() == 0, topology.output()
    deadline = time.monotonic() + 30
    while session_pids(topology.process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [command_line(pid) for pid in session_pids(topology.process.pid)] == []
    with psycopg.connect(admin_url(topology.env["DATABASE_URL"]), autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (topology.database,))
        assert left.fetchone() == (0,)
        conn.execute(f'DROP DATABASE "{topology.database}"')
        gone = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (topology.database,))
        assert gone.fetchone() == (0,)
    assert "Traceback" not in topology.output(), topology.output()
