"""A brand-new ``django-admin startproject`` site, set up with exactly the tutorial's four edits.

The site is built in a temporary folder: ``INSTALLED_APPS``, one settings dict, one
``include()``, ``migrate``; plus the tutorial's tools module (the site's own code) and a user.
Then, as "Write your own resources and prompts" says for a project package, the settings dict
names ``mysite.mcp_resources`` and ``mysite.mcp_prompts``, which hold that page's static
resource and prompt, verbatim. It runs under uvicorn as its own process (its own SQLite
database), and the official MCP Python SDK client registers itself, sends the user through the
app's own login page and the consent page (a headless browser, httpx), then, in both protocol
eras (2025-11-25 with ``initialize``, 2026-07-28 stateless), lists and calls the tool, lists and
reads the resource, lists and gets the prompt.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from urllib.parse import urlsplit

import django
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from tests.support.browser import ChromiumUser, chromium_path, loopback, open_chromium, same_origin_posts  # noqa: F401 - fixture
from tests.support.live import HeadlessBrowser, MemoryStorage, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
#: The tutorial (docs/tutorial.md) and the how-to for an existing site give the same steps.
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text()
EXISTING_SITE = (ROOT / "docs" / "how-to" / "existing-site.md").read_text()
RESOURCES_AND_PROMPTS = (ROOT / "docs" / "how-to" / "resources-and-prompts.md").read_text()
BIN = Path(sys.executable).parent
USERNAME, PASSWORD = "alice", "fresh-site-password"
DOCUMENTED_BASE_URL = "http://127.0.0.1:8000"

# The documented steps, verbatim (each is asserted to be in both pages, so they cannot drift).
EDIT_INSTALLED_APPS = 'INSTALLED_APPS += ["oauth2_provider", "mcp_oauth"]'
EDIT_SETTINGS_DICT = """MCP_OAUTH = {
    "BASE_URL": "http://127.0.0.1:8000",  # the site's public origin, no trailing slash (https://… in production)
    "TOOL_MODULES": ["mysite.mcp_tools"],  # your tools, below
}"""
EDIT_URLS = """from django.urls import include

urlpatterns += [path("", include("mcp_oauth.urls"))]"""
COMMAND_MIGRATE = "python manage.py migrate"
TOOLS_MODULE = '''from mcp_oauth.mcp_server.tools import ToolContext, tool


@tool(scopes=["mcp"])
def whoami(ctx: ToolContext) -> str:
    """The user name this client acts for."""
    return ctx.user.get_username()'''
COMMAND_SERVE = "uvicorn mysite.asgi:application"

# "Write your own resources and prompts": the project package's modules named in the settings
# dict, and the page's static resource and prompt as mysite/mcp_resources.py and mcp_prompts.py.
EDIT_SETTINGS_DICT_WITH_RESOURCES_AND_PROMPTS = """MCP_OAUTH = {
    "BASE_URL": "http://127.0.0.1:8000",  # the site's public origin, no trailing slash (https://… in production)
    "TOOL_MODULES": ["mysite.mcp_tools"],  # your tools
    "RESOURCE_MODULES": ["mysite.mcp_resources"],  # your resources: mysite/mcp_resources.py
    "PROMPT_MODULES": ["mysite.mcp_prompts"],  # your prompts: mysite/mcp_prompts.py
}"""
RESOURCES_MODULE = '''from mcp_oauth.mcp_server.registry import RequestContext, resource


@resource("docs://hello", name="hello", title="Hello", mime_type="text/markdown")
def hello(ctx: RequestContext) -> str:
    """A greeting for the signed-in user."""
    return f"# Hello, {ctx.user.get_username()}"'''
PROMPTS_MODULE = '''from mcp_oauth.mcp_server.registry import RequestContext, prompt


def languages(ctx: RequestContext, value: str) -> list[str]:
    return [language for language in ("python", "rust", "go") if language.startswith(value)]


@prompt(title="Code review", arguments={"code": "The code to review"}, completers={"language": languages})
def code_review(ctx: RequestContext, code: str, language: str = "python") -> str:
    """Ask for a review of some code."""
    return f"Review this {language} code:\\n{code}"'''
#: The protocol eras the SDK client speaks to the site: its ``mode`` and the version it negotiates.
ERAS = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


def page_has(page: str, snippet: str) -> bool:
    indented = "\n".join(("   " + line) if line else "" for line in snippet.splitlines())
    return snippet in page or indented in page


@pytest.mark.parametrize("page", [TUTORIAL, EXISTING_SITE], ids=["tutorial", "existing-site"])
def test_the_steps_are_the_documented_ones(page):
    for snippet in (EDIT_INSTALLED_APPS, EDIT_SETTINGS_DICT, EDIT_URLS, COMMAND_MIGRATE, TOOLS_MODULE, COMMAND_SERVE):
        assert page_has(page, snippet), snippet
    steps_part = page.split("Your tools go in", 1)[0]
    section = steps_part[steps_part.index("`mysite` ") :]
    steps = re.findall(r"^(\d+)\. ", section, flags=re.MULTILINE)
    assert steps == ["1", "2", "3", "4"]


def test_the_resource_and_prompt_steps_are_the_documented_ones():
    for snippet in (EDIT_SETTINGS_DICT_WITH_RESOURCES_AND_PROMPTS, RESOURCES_MODULE, PROMPTS_MODULE):
        assert page_has(RESOURCES_AND_PROMPTS, snippet), snippet
    # the how-to's dict is the tutorial's, with the two modules named
    tutorial_lines = EDIT_SETTINGS_DICT.splitlines()
    assert [line.split("  #")[0] for line in EDIT_SETTINGS_DICT_WITH_RESOURCES_AND_PROMPTS.splitlines()] == [
        *(line.split("  #")[0] for line in tutorial_lines[:-1]),
        '    "RESOURCE_MODULES": ["mysite.mcp_resources"],',
        '    "PROMPT_MODULES": ["mysite.mcp_prompts"],',
        "}",
    ]


# MCP_AUTHZ_TEST_INSTALLED=1 (the nox "release" session, which installed the built wheel): the
# site has no source tree on its path and imports mcp_oauth and elicitation from site-packages
# (checked below). Otherwise the site imports this source tree (ROOT), whatever is installed.
INSTALLED = os.environ.get("MCP_AUTHZ_TEST_INSTALLED") == "1"


def site_env(site: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the test run's Django settings (the site has its own)."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE" and key != "DATABASE_URL"}
    path = [str(site)] if INSTALLED else [str(site), str(ROOT)]
    return {**env, **extra, "PYTHONPATH": os.pathsep.join(path)}


def run(site: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=site,
        env=site_env(site, **(env or {})),
        capture_output=True,
        text=True,
        timeout=180,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def build_site(folder: Path, base_url: str) -> Path:
    """``django-admin startproject mysite`` + the tutorial's four edits + its tools module + a user."""
    folder.mkdir()
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", str(folder)],
        env=site_env(folder),
        check=True,
        timeout=60,
    )
    settings_py = folder / "mysite" / "settings.py"
    settings_py.write_text(
        settings_py.read_text()
        + "\n"
        + EDIT_INSTALLED_APPS
        + "\n"  # edit 1
        + "\n"
        + EDIT_SETTINGS_DICT.replace(DOCUMENTED_BASE_URL, base_url)
        + "\n"  # edit 2
    )
    urls_py = folder / "mysite" / "urls.py"
    urls_py.write_text(urls_py.read_text() + "\n" + EDIT_URLS + "\n")  # edit 3
    run(folder, "migrate", "--noinput", "-v0")  # edit 4
    (folder / "mysite" / "mcp_tools.py").write_text(TOOLS_MODULE + "\n")  # the site's own code
    # "Write your own resources and prompts": the settings dict names the two modules, which hold
    # the page's resource and prompt.
    settings_py.write_text(
        settings_py.read_text().replace(
            EDIT_SETTINGS_DICT.replace(DOCUMENTED_BASE_URL, base_url),
            EDIT_SETTINGS_DICT_WITH_RESOURCES_AND_PROMPTS.replace(DOCUMENTED_BASE_URL, base_url),
        )
    )
    (folder / "mysite" / "mcp_resources.py").write_text(RESOURCES_MODULE + "\n")
    (folder / "mysite" / "mcp_prompts.py").write_text(PROMPTS_MODULE + "\n")
    run(
        folder,
        "createsuperuser",
        "--noinput",
        "--username",
        USERNAME,
        "--email",
        "alice@example.com",
        env={"DJANGO_SUPERUSER_PASSWORD": PASSWORD},
    )
    return folder


@pytest.fixture(scope="module")
def fresh_site(tmp_path_factory):
    """One site for the module (building it takes a while); tests that change it work on a copy."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    return build_site(tmp_path_factory.mktemp("fresh") / "site", base_url), base_url, port


@pytest.fixture
def site_copy(fresh_site, tmp_path):
    return Path(shutil.copytree(fresh_site[0], tmp_path / "site"))


def serve(site: Path, port: int) -> subprocess.Popen:
    """``uvicorn mysite.asgi:application`` (the tutorial's command) on the test's port."""
    command = COMMAND_SERVE.split()
    process = subprocess.Popen(
        [str(BIN / command[0]), *command[1:], "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=site,
        env=site_env(site),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("uvicorn exited: " + process.stdout.read())
        try:
            httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", timeout=1)
            return process
        except httpx2.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("uvicorn did not start")


async def call_tool_with_sdk(base_url: str) -> tuple[dict[str, dict], list[str]]:
    browser = HeadlessBrowser(base_url=base_url, username=USERNAME, password=PASSWORD)
    try:
        seen = await sdk_call(base_url, browser, f"http://127.0.0.1:{free_port()}/callback")
    finally:
        await browser.aclose()
    return seen, browser.visited


async def sdk_call(base_url: str, user, redirect_uri: str) -> dict[str, dict]:
    """The SDK client registers (DCR), ``user.authorize(url)`` plays the user's part (once: the
    token serves both eras), then in each era of ``ERAS``: ``tools/list`` and ``whoami``,
    ``resources/list`` and ``docs://hello``, ``prompts/list`` and ``code_review``. ``{mode: what it saw}``."""
    pending: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        pending["url"] = url

    async def callback_handler() -> AuthorizationCodeResult:
        params = await user.authorize(pending.pop("url"))
        assert "code" in params, params
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    provider = OAuthClientProvider(
        server_url=base_url + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Fresh-site test client",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    seen: dict[str, dict] = {}
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        for mode in ERAS:
            async with Client(streamable_http_client(base_url + "/mcp", http_client=http), mode=mode) as client:
                seen[mode] = {
                    "protocol_version": client.protocol_version,
                    "tools": [item.name for item in (await client.list_tools()).tools],
                    "whoami": await client.call_tool("whoami", {}),
                    "resources": [(str(item.uri), item.name) for item in (await client.list_resources()).resources],
                    "hello": await client.read_resource("docs://hello"),
                    "prompts": [(item.name, item.title) for item in (await client.list_prompts()).prompts],
                    "code_review": await client.get_prompt("code_review", {"code": "x = 1"}),
                }
    return seen


def assert_sdk_saw_the_sites_tool_resource_and_prompt(seen: dict[str, dict]) -> None:
    """Both eras: the tutorial's tool, the how-to's resource and prompt, listed and answered."""
    assert list(seen) == list(ERAS)
    for mode, version in ERAS.items():
        era = seen[mode]
        assert era["protocol_version"] == version
        assert era["tools"] == ["whoami"]
        assert not era["whoami"].is_error, era["whoami"]
        assert [block.text for block in era["whoami"].content] == [USERNAME]
        assert era["resources"] == [("docs://hello", "hello")]
        (content,) = era["hello"].contents
        assert (str(content.uri), content.mime_type, content.text) == (
            "docs://hello",
            "text/markdown",
            f"# Hello, {USERNAME}",
        )
        assert era["prompts"] == [("code_review", "Code review")]
        (message,) = era["code_review"].messages
        assert (message.role, message.content.text) == ("user", "Review this python code:\nx = 1")


def test_the_site_imports_the_package_under_test(fresh_site):
    """The site runs this source tree, or with ``MCP_AUTHZ_TEST_INSTALLED=1`` the installed
    package (a wheel's files in site-packages, not an editable install of a source tree)."""
    site = fresh_site[0]
    result = subprocess.run(
        [sys.executable, "-c", "import elicitation, mcp_oauth; print(mcp_oauth.__file__, elicitation.__file__)"],
        cwd=site,
        env=site_env(site),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    files = [Path(name) for name in result.stdout.split()]
    assert [file.parent.name for file in files] == ["mcp_oauth", "elicitation"]
    if INSTALLED:
        purelib = Path(sysconfig.get_paths()["purelib"])
        assert [file.parent.parent for file in files] == [purelib, purelib]
    else:
        assert [file.parent.parent for file in files] == [ROOT, ROOT]


def test_a_fresh_startproject_site_serves_the_sdk_client_after_four_edits(fresh_site):
    site, base_url, port = fresh_site
    checked = run(site, "check")
    assert "System check identified no issues" in checked.stdout
    # startproject's DEBUG and key are warnings; from Django 6.1 its console-backend MAILERS
    # setting is Django's own deploy error (mail.E001). No error comes from DOT or this app.
    deploy = run(site, "check", "--deploy", check=False)
    errors = deploy.stderr.split("ERRORS:", 1)[1].split("WARNINGS:", 1)[0] if "ERRORS:" in deploy.stderr else ""
    startproject_errors = {"mail.E001"} if django.VERSION >= (6, 1) else set()
    assert set(re.findall(r"\(([\w.]+\.E\d+)\)", errors)) == startproject_errors, deploy.stderr
    assert deploy.returncode == (1 if startproject_errors else 0), deploy.stderr
    assert "oauth2_provider." not in deploy.stderr and "mcp_oauth.E" not in deploy.stderr

    server = serve(site, port)
    try:
        seen, visited = asyncio.run(call_tool_with_sdk(base_url))
        login_page = httpx2.get(base_url + "/oauth/login?next=/oauth/authorize", timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=10)

    assert_sdk_saw_the_sites_tool_resource_and_prompt(seen)
    # Signed out, the user went to the app's own login page (the site has none), then to consent.
    paths = [httpx2.URL(url).path for url in visited]
    assert "/oauth/login" in paths
    assert paths.index("/oauth/login") < len(paths) - 1
    assert login_page.status_code == 200
    assert login_page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in login_page.headers["content-security-policy"]
    assert "Sign in to 127.0.0.1" in login_page.text


@pytest.fixture
def chromium_executable() -> str:
    """Chromium for the one real-browser test here (skips, or fails under CI, without it)."""
    return chromium_path()


@pytest.mark.browser
def test_the_apps_login_and_consent_pages_work_in_chromium_on_a_fresh_site(
    fresh_site, loopback, chromium_executable, request
):
    """The same tutorial-built site, with the user's part in a real Chromium: the app's own login
    page (the site has none) and the consent page both submit with a real ``Origin`` and pass
    Django's CSRF check; the login page is styled by the app itself and names the client."""
    site, base_url, port = fresh_site

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback, screenshots="fresh-site")
            seen = await sdk_call(base_url, user, loopback.redirect_uri)
            return chromium, user, seen

    server = serve(site, port)
    try:
        chromium, user, seen = asyncio.run(scenario())
    finally:
        server.terminate()
        server.wait(timeout=10)

    assert_sdk_saw_the_sites_tool_resource_and_prompt(seen)
    (login_page,) = user.login_pages
    assert user.login_paths == ["/oauth/login"]
    assert 'id="login-client">Fresh-site test client<' in login_page
    assert len(user.consent_pages) == 1
    posts = same_origin_posts(chromium, base_url)
    assert [urlsplit(post["url"]).path for post in posts] == ["/oauth/login", "/oauth/authorize"], posts
    assert all(post["origin"] == base_url and post["status"] in (302, 303) for post in posts), posts


def test_a_readme_built_site_with_the_old_login_step_fails_check(site_copy):
    """The old README's step: Django's auth URLs without a registration/login.html template.
    ``manage.py check`` now says so instead of a 500 at the first login."""
    site = site_copy
    urls_py = site / "mysite" / "urls.py"
    urls_py.write_text(
        urls_py.read_text() + 'urlpatterns += [path("accounts/", include("django.contrib.auth.urls"))]\n'
    )
    result = run(site, "check", check=False)
    assert result.returncode == 1
    assert (
        "(mcp_oauth.E031) The login page '/accounts/login/' cannot render its template 'registration/login.html'"
        in (result.stderr)
    )
    assert "TemplateDoesNotExist" in result.stderr


def test_mcp_oauth_without_oauth2_provider_says_what_is_missing(site_copy):
    site = site_copy
    settings_py = site / "mysite" / "settings.py"
    settings_py.write_text(settings_py.read_text().replace(EDIT_INSTALLED_APPS, 'INSTALLED_APPS += ["mcp_oauth"]'))
    result = run(site, "check", check=False)
    assert result.returncode == 1
    assert (
        'mcp_oauth needs django-oauth-toolkit listed before it: INSTALLED_APPS += ["oauth2_provider", "mcp_oauth"]'
        in (result.stderr)
    )


def test_project_package_modules_no_setting_names_fail_check_with_w022(site_copy):
    """The resource and prompt modules written, the settings dict left as the tutorial's: they
    would never load, and ``manage.py check`` says so with the line to add."""
    site = site_copy
    settings_py = site / "mysite" / "settings.py"
    text = settings_py.read_text()
    for line in ('    "RESOURCE_MODULES": ["mysite.mcp_resources"],', '    "PROMPT_MODULES": ["mysite.mcp_prompts"],'):
        assert line in text
        text = text.replace(line + "  # your resources: mysite/mcp_resources.py", "").replace(
            line + "  # your prompts: mysite/mcp_prompts.py", ""
        )
    settings_py.write_text(text)
    result = run(site, "check", check=False)
    assert result.returncode == 0, result.stderr  # warnings only
    warnings = sorted(line.strip() for line in result.stderr.splitlines() if "mcp_oauth.W022" in line)
    assert warnings == [
        "?: (mcp_oauth.W022) 'mysite.mcp_prompts' is never imported: 'mysite' is not an installed app and"
        ' MCP_OAUTH["PROMPT_MODULES"] does not name it, so its prompts are not served.',
        "?: (mcp_oauth.W022) 'mysite.mcp_resources' is never imported: 'mysite' is not an installed app and"
        ' MCP_OAUTH["RESOURCE_MODULES"] does not name it, so its resources are not served.',
    ]
    assert 'HINT: Name it in the settings: MCP_OAUTH["RESOURCE_MODULES"] = ["mysite.mcp_resources"].' in result.stderr
