"""Real-browser fixtures: Playwright for Python driving Debian's Chromium against the live ASGI server.

* ``require_chromium`` (module-scoped autouse fixture, import it into each browser test module)
  and ``chromium_executable``: ``/usr/bin/chromium`` (or ``$CHROMIUM_PATH``). When it is missing
  the tests skip, reported as one line saying how to install it; under CI (``CI=true``) they fail.
* :func:`open_chromium`: an async context manager yielding a :class:`Chromium` (headless, one
  browser; ``new_page()`` opens a page in a fresh context = a fresh cookie jar). Every POST the
  pages make is recorded with its ``Origin`` header and status (:attr:`Chromium.posts`). When the
  block fails, every open page is saved as a PNG under :data:`ARTIFACTS` and the folder is
  printed and added to the failure.
* :class:`LoopbackListener` (fixture ``loopback``): the client's RFC 8252 loopback redirect
  listener, a real HTTP server on ``127.0.0.1`` (Playwright's request routing does not see a
  navigation that arrives through a redirect).
* :class:`ChromiumUser`: plays the user for an MCP client's OAuth flow (login form, consent
  page, Authorize or Cancel) and returns what reached the listener; it fits the ``browser``
  parameter of :func:`tests.e2e.test_python_sdk.make_provider`.
* :func:`shot`: with ``BROWSER_SCREENSHOTS=<folder>`` set, saves a PNG of a page (to look at the
  pages; nothing is asserted on it).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright

from tests.support.live import free_port, run_asgi_server

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
INSTALL_HINT = f"Chromium not found at {CHROMIUM} (install it: apt-get install chromium)"
#: Where failing browser tests leave their screenshots.
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS") or Path(tempfile.gettempdir()) / "mcp-authz-browser-artifacts")


def chromium_available() -> bool:
    return os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def chromium_path() -> str:
    """The Chromium executable; skips the test when there is none (fails under ``CI=true``)."""
    if chromium_available():
        return CHROMIUM
    if under_ci():
        pytest.fail(f"CI: {INSTALL_HINT}", pytrace=False)
    pytest.skip(INSTALL_HINT)


# --- hooks (imported by tests/conftest.py) ---------------------------------------------------


def pytest_collection_modifyitems(config, items) -> None:
    """Without Chromium (and not under CI), set the ``browser`` tests aside before any server starts."""
    if chromium_available() or under_ci():
        return
    skipped = [item for item in items if item.get_closest_marker("browser")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if not item.get_closest_marker("browser")]
        config.stash[_SKIPPED] = len(skipped)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The one line saying the real-browser tests did not run, and how to install Chromium."""
    count = config.stash.get(_SKIPPED, 0)
    if count:
        terminalreporter.write_line(f"SKIPPED {count} real-browser tests: {INSTALL_HINT}", yellow=True, bold=True)


_SKIPPED = pytest.StashKey[int]()


@pytest.fixture(scope="module", autouse=True)
def require_chromium() -> str:
    """Imported by every browser test module: skips (or fails under CI) before any server starts."""
    return chromium_path()


@pytest.fixture
def chromium_executable(require_chromium) -> str:
    return require_chromium


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]


@dataclass
class Chromium:
    """One headless Chromium; pages in fresh contexts; the POSTs they made."""

    browser: object
    name: str
    contexts: list[BrowserContext] = field(default_factory=list)
    posts: list[dict] = field(default_factory=list)

    async def new_page(self) -> Page:
        context = await self.browser.new_context(viewport={"width": 1000, "height": 800})
        context.on("response", self._record)
        self.contexts.append(context)
        return await context.new_page()

    async def _record(self, response) -> None:
        request = response.request
        if request.method == "POST":
            self.posts.append(
                {"url": request.url, "status": response.status, "origin": await request.header_value("origin")}
            )

    async def save_screenshots(self) -> Path:
        folder = ARTIFACTS / _safe(self.name)
        folder.mkdir(parents=True, exist_ok=True)
        number = 0
        for context in self.contexts:
            for page in context.pages:
                number += 1
                try:
                    await page.screenshot(path=str(folder / f"page-{number}.png"), full_page=True)
                except Exception as exc:  # noqa: BLE001 - a crashed page: say so next to the others
                    (folder / f"page-{number}.txt").write_text(f"{page.url}\n{exc!r}\n")
        return folder


@asynccontextmanager
async def open_chromium(executable: str, name: str) -> AsyncIterator[Chromium]:
    """Headless Chromium for one test (``name`` names its screenshot folder on failure)."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True)
        chromium = Chromium(browser, name)
        try:
            yield chromium
        except BaseException as exc:
            folder = await chromium.save_screenshots()
            sys.__stderr__.write(f"\nbrowser screenshots of the failing test: {folder}\n")
            if isinstance(exc, Exception):
                exc.add_note(f"browser screenshots: {folder}")
            raise
        finally:
            await browser.close()


async def shot(page: Page, name: str) -> None:
    """Save a PNG of ``page`` as ``$BROWSER_SCREENSHOTS/<name>.png`` when that variable is set."""
    folder = os.environ.get("BROWSER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(folder) / f"{_safe(name)}.png"), full_page=True)


def same_origin_posts(chromium: Chromium, base: str) -> list[dict]:
    """The POSTs to ``base``'s origin."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(base))
    return [post for post in chromium.posts if post["url"].startswith(origin + "/")]


class LoopbackListener:
    """An RFC 8252 §7.3 loopback redirect listener: ``http://127.0.0.1:<port>/callback``.

    Records the query of every request to ``/callback`` (other paths, like ``/favicon.ico``,
    get 404) and answers a small page, as a desktop MCP client does.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.hits: list[dict[str, str]] = []

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/callback":
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"not found"})
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        self.hits.append({key: values[0] for key, values in query.items()})
        body = b"<!doctype html><title>Signed in</title><p>Authorization received. You can close this window.</p>"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html; charset=utf-8")]}
        )
        await send({"type": "http.response.body", "body": body})

    async def wait(self, count: int = 1, timeout: float = 15) -> dict[str, str]:
        """The query of the ``count``-th redirect received (waits for it)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.hits) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"nothing reached the loopback listener {self.redirect_uri} within {timeout} s")
            await asyncio.sleep(0.05)
        return self.hits[count - 1]


@pytest.fixture
def loopback() -> LoopbackListener:
    listener = LoopbackListener()
    with run_asgi_server(listener, listener.port):
        yield listener


async def log_in(page: Page, username: str, password: str, screenshot: str | None = None) -> None:
    """Fill the site's login form (``id_username`` / ``id_password``) and submit it."""
    await page.fill("#id_username", username)
    await page.fill("#id_password", password)
    if screenshot:
        await shot(page, screenshot)
    async with page.expect_navigation():
        await page.click("form [type=submit]")


@dataclass
class ChromiumUser:
    """The user of an MCP client, in Chromium: logs in if asked, then Authorize (or Cancel) on the consent page.

    ``authorize(url) -> query`` returns the query the client's loopback listener received.
    """

    page: Page
    username: str
    password: str
    listener: LoopbackListener
    approve: bool = True
    screenshots: str = ""
    login_pages: list[str] = field(default_factory=list)
    login_paths: list[str] = field(default_factory=list)
    consent_pages: list[str] = field(default_factory=list)

    async def authorize(self, url: str) -> dict[str, str]:
        seen = len(self.listener.hits)
        await self.page.goto(url)
        path = urlsplit(self.page.url).path
        if path.startswith(("/accounts/login", "/oauth/login")):  # the site's login page, or the app's own
            self.login_paths.append(path)
            self.login_pages.append(await self.page.content())
            await log_in(self.page, self.username, self.password, self.screenshots and f"{self.screenshots}-login")
        await self.page.wait_for_selector("#authorizationForm")
        self.consent_pages.append(await self.page.content())
        if self.screenshots:
            await shot(self.page, f"{self.screenshots}-consent")
        async with self.page.expect_navigation():
            await self.page.click("#authorize" if self.approve else "#cancel")
        return await self.listener.wait(seen + 1)
