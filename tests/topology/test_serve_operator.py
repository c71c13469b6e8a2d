"""The operator's path, end to end: ``make serve`` (``python -m project.serve``) on a fresh tree.

A copy of the project's files (no ``staticfiles/``, no ``.local/``) is started with only documented
variables and the http-on-loopback switch (``DJANGO_INSECURE_LOOPBACK_HTTP=1``, docs "Run in
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

Then the same behind a TLS-terminating proxy (``tests/support/tls_proxy.py``: ``https://localhost:<port>``
setting ``X-Forwarded-Proto``) with the documented proxy variables (``MCP_BASE_URL`` https,
``DJANGO_ALLOWED_HOSTS``, ``DJANGO_SECURE_PROXY_SSL_HEADER``): pages are secure (HSTS, Secure
cookies) and never redirected again, a request around the proxy is redirected to it once, the SDK
client completes OAuth over https, and the administrator signs in in Chromium.

Skipped unless the test database is PostgreSQL and Redis answers (tests/support/topology.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_python_sdk import Live, MemoryStorage, make_provider, structured
from tests.support.browser import chromium_path, open_chromium, same_origin_posts, shot
from tests.support.live import HeadlessBrowser, free_port
from tests.support.tls_proxy import client_context, tls_proxy
from tests.support.topology import REDIS_URL, database_url, require_postgres_and_redis

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
ADMIN, ADMIN_EMAIL, ADMIN_PASSWORD = "operator", "operator@example.com", "operator-password-e2e-7fQ"
#: The environment of this machine that is not the site's (the site reads only what the test gives it).
SYSTEM = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")


#: What a clone does not have (``.gitignore``), for a tree that is not a git checkout.
NOT_IN_A_CLONE = (".git", ".venv", ".local", "staticfiles", "node_modules", "__pycache__", "*.sqlite3", ".*_cache")


def fresh_tree(target: Path) -> Path:
    """The project's files as a clone has them (tracked and new, not ignored) copied to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True
    )
    if listed.returncode != 0:  # not a git checkout (an unpacked archive): everything a clone would have
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE), dirs_exist_ok=True)
    for name in filter(None, listed.stdout.decode().split("\0") if listed.returncode == 0 else []):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target / "staticfiles").exists() and not (target / ".local").exists()
    assert (target / "project" / "serve.py").is_file()
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
    backend: str
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
    """Until gunicorn answers at all (directly, not through a proxy); fails when serve exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if topology.process.poll() is not None:
            raise AssertionError(f"project.serve exited with {topology.process.returncode}:\n{topology.output()}")
        try:
            httpx2.get(topology.backend + "/.well-known/oauth-protected-resource/mcp", timeout=2)
            return
        except httpx2.HTTPError:
            time.sleep(0.25)
    raise AssertionError(f"the topology did not answer within {timeout} s:\n{topology.output()}")


def started_processes(topology: Topology, count: int, timeout: float = 60) -> list[str]:
    """The command lines of the topology's processes once there are ``count`` (the Celery
    worker's pool child starts after the site answers)."""
    deadline = time.monotonic() + timeout
    while len(session_pids(topology.process.pid)) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return [command_line(pid) for pid in session_pids(topology.process.pid)]


@contextlib.contextmanager
def running_topology(tree: Path, base: str | None = None, port: int = 0, **documented: str) -> Iterator[Topology]:
    """``python -m project.serve`` in ``tree`` (its own session) with the machine's environment
    (PATH, HOME, …), a database of its own, Redis, WORKERS=2 and ``documented``; stopped, every
    process gone, the database dropped and the Redis DB flushed when the block ends."""
    require_postgres_and_redis()
    import redis

    server = database_url().rsplit("/", 1)[0]
    name = database_url().rsplit("/", 1)[1].removeprefix("test_") + "_serve_" + secrets.token_hex(3)
    port = port or free_port()
    env = {k: os.environ[k] for k in SYSTEM if k in os.environ}
    env.update(
        {
            "DATABASE_URL": f"{server}/{name}",
            "REDIS_URL": REDIS_URL,
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "WORKERS": "2",
            "DB_POOL_MAX_SIZE": "2",
            "DB_POOL_MAX_SIZE_CELERY": "1",
            "CELERY_CONCURRENCY": "1",
            **documented,
        }
    )
    redis.Redis.from_url(REDIS_URL).flushdb()  # this test's Redis DB: no cache entry of another site
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
    backend = f"http://127.0.0.1:{port}"
    running = Topology(tree, env, base or backend, backend, port, name, process, log)
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()
        for pid in session_pids(process.pid):  # only when a test failed before its SIGTERM: never leave them
            os.kill(pid, signal.SIGKILL)
        with psycopg.connect(admin_url(env["DATABASE_URL"]), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        redis.Redis.from_url(REDIS_URL).flushdb()


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    """Plain http on loopback (the switch), in a fresh tree."""
    tree = fresh_tree(tmp_path_factory.mktemp("fresh-clone"))
    with running_topology(tree, DJANGO_INSECURE_LOOPBACK_HTTP="1") as running:
        yield running


def test_a_fresh_tree_is_served_with_static_files_and_no_demo_account(topology):
    manifest = topology.tree / "staticfiles" / "staticfiles.json"
    assert manifest.is_file(), topology.output()  # collectstatic ran in the fresh tree, before the workers
    secrets_kept = {"elicitation-keys", "request-state-keys", "serve-secret-key"}
    assert {p.name for p in (topology.tree / ".local").iterdir()} & secrets_kept == secrets_kept
    assert {oct((topology.tree / ".local" / name).stat().st_mode & 0o777) for name in secrets_kept} == {"0o600"}
    assert topology.query("SELECT username FROM auth_user") == []
    output = topology.output()
    assert "manage.py createsuperuser" in output and "DJANGO_SUPERUSER_PASSWORD" in output
    # the printed command names this database (without it manage.py would use the embedded SQLite)
    assert f"DATABASE_URL={topology.env['DATABASE_URL']} " in output
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


@dataclass
class VerifyingBrowser(HeadlessBrowser):
    """The headless user agent of ``tests/support/live.py``, verifying TLS against ``verify``."""

    verify: object = True

    def __post_init__(self) -> None:
        self.http = httpx2.AsyncClient(base_url=self.base_url, follow_redirects=False, timeout=30, verify=self.verify)


def sdk_client_run(topology: Topology, verify: object = True) -> tuple[dict, str, Live, VerifyingBrowser]:
    """The official SDK client (DCR, the administrator's login and consent in the headless user
    agent) lists tools and calls ``whoami`` twice and ``echo`` at ``topology.base``; returns what
    it saw, its client_id, the exchanges and the user agent."""
    live = Live(base=topology.base, port=topology.port)
    storage = MemoryStorage()
    browser = VerifyingBrowser(topology.base, ADMIN, ADMIN_PASSWORD, verify=verify)

    async def record(response: httpx2.Response) -> None:
        live.exchanges.append((response.request.method, response.request.url.path, response.status_code))

    async def scenario():
        provider = make_provider(live, storage, browser)
        try:
            hooks = {"response": [record]}
            async with httpx2.AsyncClient(auth=provider, timeout=30, verify=verify, event_hooks=hooks) as http:
                async with Client(streamable_http_client(live.mcp_url, http_client=http), mode="auto") as client:
                    tools = await client.list_tools()
                    whoami = [await client.call_tool("whoami", {}) for _ in range(2)]
                    echo = await client.call_tool("echo", {"text": "héllo"})
            return {"tools": tools, "whoami": whoami, "echo": echo}
        finally:
            await browser.aclose()

    seen = asyncio.run(scenario())
    return seen, storage.client_info.client_id, live, browser


def assert_sdk_run(topology: Topology, seen: dict, client_id: str, live: Live, browser: VerifyingBrowser) -> None:
    assert {"whoami", "echo"} <= {tool.name for tool in seen["tools"].tools}
    for result in seen["whoami"]:
        assert not result.is_error, result
        data = structured(result)
        assert (data["user"], data["client_id"]) == (ADMIN, client_id)
    assert "héllo" in seen["echo"].content[0].text
    assert any("/accounts/login/" in url for url in browser.visited)
    assert all(url.startswith(topology.base + "/") for url in browser.visited), browser.visited
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


def test_the_official_python_sdk_client_completes_oauth_and_calls_tools(topology):
    assert_sdk_run(topology, *sdk_client_run(topology))


async def admin_sign_in(chromium, base: str, styles: list, https: bool = False) -> tuple[str, str, str, str]:
    """In a fresh Chromium context: /admin/ → the login page (its stylesheets recorded in
    ``styles``), the administrator signs in; returns (login path, header colour, path after, user tools)."""
    context = await chromium.browser.new_context(viewport={"width": 1000, "height": 800}, ignore_https_errors=https)
    context.on("response", chromium._record)
    chromium.contexts.append(context)
    page = await context.new_page()

    async def on_response(response):
        if response.request.resource_type == "stylesheet":
            styles.append((response.url, response.status, (await response.all_headers()).get("content-type", "")))

    page.on("response", on_response)
    await page.goto(base + "/admin/")
    login_path = urlsplit(page.url).path
    header_color = await page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
    await shot(page, "serve-admin-login")
    await page.fill("#id_username", ADMIN)
    await page.fill("#id_password", ADMIN_PASSWORD)
    async with page.expect_navigation():
        await page.click("form [type=submit]")
    await shot(page, "serve-admin-index")
    return login_path, header_color, urlsplit(page.url).path, await page.inner_text("#user-tools")


def assert_admin_signed_in(base: str, styles: list, seen: tuple, posts: list) -> None:
    login_path, header_color, after, user_tools = seen
    assert login_path == "/admin/login/"
    base_css = [item for item in styles if "/static/admin/css/base." in item[0]]
    assert base_css, styles
    for url, status, kind in styles:
        assert url.startswith(base + "/static/") and status == 200 and kind.startswith("text/css"), styles
    # collectstatic's manifest names: base.<hash>.css, not base.css
    assert not base_css[0][0].endswith("/static/admin/css/base.css"), base_css
    assert header_color not in ("rgba(0, 0, 0, 0)", "transparent")
    assert after == "/admin/"
    assert ADMIN.upper() in user_tools.upper()
    assert [(post["status"], post["origin"]) for post in posts] == [(302, base)]


@pytest.mark.browser
def test_in_chromium_the_admin_login_is_styled_and_the_administrator_signs_in(topology, request):
    executable = chromium_path()
    styles: list[tuple[str, int, str]] = []

    async def scenario():
        async with open_chromium(executable, request.node.name) as chromium:
            return await admin_sign_in(chromium, topology.base, styles), same_origin_posts(chromium, topology.base)

    seen, posts = asyncio.run(scenario())
    assert_admin_signed_in(topology.base, styles, seen, posts)


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


# --- behind a TLS-terminating proxy ----------------------------------------------------------


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """https://localhost:<port> (tests/support/tls_proxy.py) → gunicorn on loopback, in a fresh tree, with
    the documented proxy variables; the administrator made with ``createsuperuser --noinput``."""
    require_postgres_and_redis()
    tree = fresh_tree(tmp_path_factory.mktemp("fresh-clone-proxied"))
    port = free_port()
    with tls_proxy(f"http://127.0.0.1:{port}") as (base, proxy):
        with running_topology(
            tree,
            base,
            port=port,
            MCP_BASE_URL=base,
            DJANGO_ALLOWED_HOSTS="localhost",
            DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO",
        ) as running:
            created = running.manage(
                "createsuperuser",
                "--noinput",
                DJANGO_SUPERUSER_USERNAME=ADMIN,
                DJANGO_SUPERUSER_EMAIL=ADMIN_EMAIL,
                DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
            )
            assert created.returncode == 0, created.stdout + created.stderr
            yield running


def test_behind_the_proxy_pages_are_secure_and_a_request_around_it_is_sent_to_it_once(proxied):
    https = httpx2.Client(verify=client_context(), timeout=10)
    login = https.get(proxied.base + "/admin/login/")
    assert login.status_code == 200
    assert login.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
    assert login.headers["set-cookie"].startswith("csrftoken=") and "; Secure" in login.headers["set-cookie"]
    spoofed = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "http"}
    metadata = https.get(proxied.base + "/.well-known/oauth-authorization-server", headers=spoofed)
    assert metadata.json()["issuer"] == proxied.base
    assert metadata.json()["token_endpoint"] == proxied.base + "/oauth/token"
    # Around the proxy (plain http to gunicorn, the public Host): one redirect, to the proxy.
    around = httpx2.get(proxied.backend + "/admin/login/", headers={"Host": urlsplit(proxied.base).netloc}, timeout=10)
    assert (around.status_code, around.headers["location"]) == (301, proxied.base + "/admin/login/")
    # A Host that is not the site's: refused.
    assert httpx2.get(proxied.backend + "/admin/login/", timeout=10).status_code == 400


def test_behind_the_proxy_the_official_python_sdk_client_completes_oauth(proxied):
    assert_sdk_run(proxied, *sdk_client_run(proxied, verify=client_context()))


@pytest.mark.browser
def test_behind_the_proxy_in_chromium_the_administrator_signs_in(proxied, request):
    executable = chromium_path()
    styles: list[tuple[str, int, str]] = []

    async def scenario():
        async with open_chromium(executable, request.node.name) as chromium:
            seen = await admin_sign_in(chromium, proxied.base, styles, https=True)
            return seen, same_origin_posts(chromium, proxied.base)

    seen, posts = asyncio.run(scenario())
    assert_admin_signed_in(proxied.base, styles, seen, posts)
