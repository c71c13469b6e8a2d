"""The person at the browser during the suite's ``authorization-code-grant`` scenario (run by run.py).

The suite prints an authorization request URL and waits for the authorization response on its own
callback server (``http://127.0.0.1:<port>/callback``), as it would for a person who opens the URL,
signs in and approves. :func:`approve` is that person: headless Chromium (Playwright, Debian's
``/usr/bin/chromium`` or ``$CHROMIUM_PATH``) opens the URL on the fixture site, signs in on the
site's own login page with the fixture user's password, presses *Authorize* on the real consent
page and lets the browser follow the redirect to the suite's callback. Nothing on the site is
bypassed: the client is an ordinary registered public client, the user an ordinary user.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
#: How long one page step may take (milliseconds); the suite itself waits 5 minutes for the callback.
STEP_TIMEOUT_MS = 60_000


class ApprovalFailed(Exception):
    """The browser could not sign in, find the consent page or reach the callback; the message says where."""


def approve(authorization_url: str, *, username: str, password: str, callback_prefix: str, evidence: Path) -> str:
    """Sign in and approve the authorization request ``authorization_url``; return the callback URL reached.

    :param callback_prefix: ``http://127.0.0.1:<port>/callback`` (the suite's redirect URI).
    :param evidence: a directory for a screenshot and the page's HTML when a step fails.
    :raises ApprovalFailed: no Chromium, or a step did not happen within :data:`STEP_TIMEOUT_MS`.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        raise ApprovalFailed(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        except PlaywrightError as exc:
            raise ApprovalFailed(f"could not start Chromium: {str(exc).splitlines()[0]}") from None
        page = browser.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        step = "open the authorization URL"
        try:
            page.goto(authorization_url)
            if page.locator("input[name=password]").count():
                step = "sign in"
                page.fill("input[name=username]", username)
                page.fill("input[name=password]", password)
                with page.expect_navigation():
                    page.locator("form button[type=submit]").first.click()
            step = "approve on the consent page"
            page.locator("#authorize").click()
            step = "reach the suite's callback"
            page.wait_for_url(callback_prefix + "**")
            return page.url
        except PlaywrightError as exc:
            evidence.mkdir(parents=True, exist_ok=True)
            try:
                page.screenshot(path=str(evidence / "authorization-failed.png"))
                (evidence / "authorization-failed.html").write_text(page.content())
            except PlaywrightError:
                pass
            raise ApprovalFailed(f"could not {step} (at {page.url}): {str(exc).splitlines()[0]}") from None
        finally:
            browser.close()
