"""URL-mode elicitation on two worker processes, in every order, in both MCP eras (SEP-1036).

The tool is ``set_api_key`` (``elicit_url`` of a secure input page). Workers A and B are two
uvicorn processes on the test database (:mod:`tests.support.cross_worker_url`); in every test the
placement is chosen: which worker runs the tool, which one the client's answer reaches, which one
the user finishes the page on, and in which order. Timeouts are short (answer 15 s, retry hold
as set per test): an answer that is lost shows as the timeout's message, which the tests reject.

* 2025-11-25: the client's "accept" to ``elicitation/create`` may arrive after the user already
  finished the page, and on the other worker; the tool still gets it and reports the value stored.
* 2026-07-28: the retry carrying ``inputResponses`` + ``requestState`` may reach either worker,
  after the page was finished (complete), before (another ``input_required`` after the hold), or
  while held (complete once the page is finished on the other worker).
"""

from __future__ import annotations

import html
import re

import httpx2
import pytest
from django.contrib.auth.hashers import make_password

from elicitation.models import Elicitation, StoredSecret
from mcp_oauth.models import McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.cross_worker_url import (
    KEY,
    STORED,
    PageUser,
    answer,
    final_message,
    legacy_session,
    modern_call,
    modern_headers,
    sse_messages,
    two_workers,
    without_meta,
)
from tests.support.elicitation_helpers import PASSWORD, demo_provider
from tests.support.live import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "set_api_key", "arguments": {}}}
OTHER = {"a": "b", "b": "a"}


def shown_client_name(page: str) -> str:
    """The client name as the page shows it (the text of ``#client-name``)."""
    match = re.search(r'<strong id="client-name">(.*?)</strong>', page, re.S)
    assert match, page[:1000]
    return html.unescape(match.group(1))


@pytest.fixture
def site(settings, user, public_app, mint_token):
    """A's port, the token of ``alice`` for client "Test client", the test process on A's base URL."""
    port_a = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port_a}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [KEY]}
    # the workers' own hasher: signing in there must not re-hash the password (a re-hash is
    # saved as a password change, which revokes the user's tokens)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    type(user).objects.filter(pk=user.pk).update(password=make_password(PASSWORD))
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    return port_a, token


@pytest.fixture
def person(user):
    page_user = PageUser(user.get_username())
    yield page_user
    page_user.close()


# --- 2025-11-25 sessions: elicitation/create on the tools/call stream ---------------------------

PLACEMENTS = [(tool, to, on) for tool in "ab" for to in "ab" for on in "ab"]  # tool, answer to, page on


def run_legacy(http, workers, headers, person, call_id: int, *, tool: str, answer_to: str, page_on: str, page_first):
    """set_api_key (JSON-RPC id ``call_id``) on ``tool``; the page finished on ``page_on`` and the
    client's accept POSTed to ``answer_to``, page first or answer first.
    :returns: (elicitation/create, final message, the page as shown)."""
    seen: dict = {}
    value = f"sk-{call_id}"
    call = {**CALL, "id": call_id}
    with http.stream("POST", f"{workers.urls[tool]}/mcp", headers=headers, json=call) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for message in sse_messages(stream.iter_lines()):
            if message.get("method") == "elicitation/create":
                seen["request"] = message
                link = workers.on(page_on, message["params"]["url"])
                if page_first:
                    seen["page"] = person.save_secret(link, value)
                posted = http.post(f"{workers.urls[answer_to]}/mcp", headers=headers, json=answer(message["id"]))
                assert posted.status_code == 202, posted.text
                if not page_first:
                    seen["page"] = person.save_secret(link, value)
            elif message.get("id") == call_id:
                seen["final"] = message
                break
    return seen["request"], seen["final"], seen["page"].text


@pytest.mark.parametrize("page_first", [True, False], ids=["page-first", "answer-first"])
def test_legacy_url_elicitation_in_every_order(site, user, public_app, person, page_first):
    """Every placement (the tool on A or B, the answer to A or B, the page on A or B), page first or
    answer first: the tool reports the value stored, the row is completed (never expired), the
    first answer is on record, and the page named the token's client."""
    port_a, token = site
    with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
        headers = legacy_session(http, workers.urls["a"], token)
        session_id = headers["Mcp-Session-Id"]
        for call_id, (tool, answer_to, page_on) in enumerate(PLACEMENTS, start=10):
            where = f"tool on {tool}, answer to {answer_to}, page on {page_on}"
            request, final, page = run_legacy(
                http,
                workers,
                headers,
                person,
                call_id,
                tool=tool,
                answer_to=answer_to,
                page_on=page_on,
                page_first=page_first,
            )
            assert final["result"] == {"content": [{"type": "text", "text": STORED}], "isError": False}, where
            row = Elicitation.objects.get(elicitation_id=request["params"]["elicitationId"])
            assert request["id"] == f"elicitation-{row.elicitation_id}" and request["params"]["mode"] == "url"
            assert (row.status, row.error, row.kind, row.session_id, row.application_id) == (
                "completed",
                "",
                "secret",
                session_id,
                public_app.pk,
            ), where
            assert row.client_answered_at is not None, where  # no later answer is taken
            # an answer that reached the other worker is kept on the row; one delivered in-process is not stored
            assert row.client_answer == (answer(request["id"]) if answer_to != tool else None), where
            assert StoredSecret.objects.get(user=user, name="demo_api_key").value == f"sk-{call_id}", where
            assert shown_client_name(page) == "Test client", where
    assert Elicitation.objects.filter(status="completed").count() == Elicitation.objects.count() == len(PLACEMENTS)


def test_an_answer_from_another_session_or_for_an_unknown_id_is_ignored_on_either_worker(
    site, user, public_app, person
):
    """Before the real answer, the same user's other session "declines" the row on B and an answer
    names an unknown elicitation id on A: both 202, nothing recorded; the tool gets the real one."""
    port_a, token = site
    with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
        headers = legacy_session(http, workers.urls["a"], token)
        intruder = legacy_session(http, workers.urls["b"], token)
        with http.stream("POST", f"{workers.urls['a']}/mcp", headers=headers, json=CALL) as stream:
            for message in sse_messages(stream.iter_lines()):
                if message.get("method") == "elicitation/create":
                    person.save_secret(workers.on("b", message["params"]["url"]), "sk-1")
                    foreign = http.post(
                        f"{workers.urls['b']}/mcp", headers=intruder, json=answer(message["id"], "decline")
                    )
                    unknown = http.post(f"{workers.urls['a']}/mcp", headers=headers, json=answer("elicitation-nope"))
                    assert (foreign.status_code, unknown.status_code) == (202, 202)
                    row = Elicitation.objects.get()
                    assert (row.status, row.client_answer, row.client_answered_at) == ("completed", None, None)
                    real = http.post(f"{workers.urls['b']}/mcp", headers=headers, json=answer(message["id"]))
                    assert real.status_code == 202
                    late = http.post(f"{workers.urls['b']}/mcp", headers=headers, json=answer(message["id"], "cancel"))
                    assert late.status_code == 202
                elif message.get("id") == 2:
                    final = message
                    break
    assert final["result"]["content"][0]["text"] == STORED
    row = Elicitation.objects.get()
    assert row.status == "completed" and row.client_answer == answer(f"elicitation-{row.elicitation_id}")


def test_legacy_connect_interstitial_names_the_client_on_the_other_worker(site, public_app, person):
    """require_connection (-32042): the interstitial opened on B names the token's client, escaped."""
    public_app.name = '<script>alert("x")</script> Notes'
    public_app.save()
    demo_provider()
    port_a, token = site
    with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
        headers = legacy_session(http, workers.urls["a"], token)
        call = {**CALL, "params": {"name": "demo_profile", "arguments": {}}}
        error = final_message(http.post(f"{workers.urls['a']}/mcp", headers=headers, json=call), 2)["error"]
        (link,) = [e["url"] for e in error["data"]["elicitations"]]
        page = person.open(workers.on("b", link)).text
    assert error["code"] == -32042
    assert shown_client_name(page) == '<script>alert("x")</script> Notes'
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; Notes" in page and "<script>alert" not in page


# --- 2026-07-28 requests: input_required, the retry on any worker -------------------------------


def first_round(http: httpx2.Client, url: str, token: str, tool: str = "set_api_key") -> tuple[str, str]:
    """The first tools/call: ``input_required`` with one URL input request. :returns: (url, requestState)."""
    response = http.post(f"{url}/mcp", headers=modern_headers(token, tool), json=modern_call(tool, 1))
    result = final_message(response, 1)["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    request = result["inputRequests"][key]
    assert key == "input-1" and request["method"] == "elicitation/create" and request["params"]["mode"] == "url"
    assert "elicitationId" not in request["params"]
    return request["params"]["url"], result["requestState"]


def retry(http: httpx2.Client, url: str, token: str, state: str, request_id: int, action: str = "accept") -> dict:
    call = modern_call("set_api_key", request_id, requestState=state, inputResponses={"input-1": {"action": action}})
    response = http.post(f"{url}/mcp", headers=modern_headers(token, "set_api_key"), json=call)
    assert response.status_code == 200, response.text
    return final_message(response, request_id)["result"]


def test_modern_retry_after_the_page_was_finished_completes_on_either_worker(site, user, public_app, person):
    """The first round on A or B, the page finished on A or B, then the retry on A or B: complete."""
    port_a, token = site
    with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
        for n, (first_on, page_on, retry_on) in enumerate(PLACEMENTS):
            where = f"first round on {first_on}, page on {page_on}, retry on {retry_on}"
            link, state = first_round(http, workers.urls[first_on], token)
            page = person.save_secret(workers.on(page_on, link), f"sk-modern-{n}").text
            result = retry(http, workers.urls[retry_on], token, state, 2)
            assert without_meta(result) == {
                "resultType": "complete",
                "content": [{"type": "text", "text": STORED}],
                "isError": False,
            }, where
            row = Elicitation.objects.get(elicitation_id=link.rstrip("/").rsplit("/", 1)[-1])
            assert (row.status, row.session_id, row.application_id) == ("completed", None, public_app.pk), where
            assert StoredSecret.objects.get(user=user, name="demo_api_key").value == f"sk-modern-{n}", where
            assert shown_client_name(page) == "Test client", where
    assert not McpSession.objects.exists()


def test_modern_retry_before_the_page_is_finished_asks_again_then_completes(site, person):
    """Held for URL_RETRY_WAIT_SECONDS (1 s) while nobody finishes the page: input_required again,
    the same link; after the page is finished, the next retry (its new state) completes."""
    port_a, token = site
    with two_workers(port_a, elicitation={"URL_RETRY_WAIT_SECONDS": 1}) as workers, httpx2.Client(timeout=30) as http:
        for n, (retry_on, page_on, again_on) in enumerate([("b", "a", "b"), ("a", "b", "a"), ("b", "b", "a")]):
            where = f"retry on {retry_on}, page on {page_on}, next retry on {again_on}"
            link, state = first_round(http, workers.urls["a"], token)
            row = Elicitation.objects.get(elicitation_id=link.rstrip("/").rsplit("/", 1)[-1])
            again = retry(http, workers.urls[retry_on], token, state, 2)
            assert again["resultType"] == "input_required", where
            assert again["inputRequests"]["input-1"]["params"]["url"] == link, where  # the same link
            assert Elicitation.objects.get(pk=row.pk).status == "pending", where
            person.save_secret(workers.on(page_on, link), f"sk-later-{n}")
            done = retry(http, workers.urls[again_on], token, again["requestState"], 3)
            assert without_meta(done) == {
                "resultType": "complete",
                "content": [{"type": "text", "text": STORED}],
                "isError": False,
            }, where
            assert Elicitation.objects.get(pk=row.pk).status == "completed", where
    assert Elicitation.objects.count() == 3  # one row each: asking again reused its link


def test_modern_retry_held_while_the_page_is_finished_completes(site, person):
    """The retry is held (its response turned to SSE after 0.5 s of silence: the tool waits for the
    row); the page is then finished, on either worker: the held retry completes."""
    port_a, token = site
    headers = modern_headers(token, "set_api_key")
    with two_workers(port_a, elicitation={"URL_RETRY_WAIT_SECONDS": 30}) as workers, httpx2.Client(timeout=40) as http:
        for n, (retry_on, page_on) in enumerate([("a", "b"), ("b", "a"), ("b", "b")]):
            where = f"retry held on {retry_on}, page on {page_on}"
            link, state = first_round(http, workers.urls["a"], token)
            call = modern_call("set_api_key", 2, requestState=state, inputResponses={"input-1": {"action": "accept"}})
            with http.stream("POST", f"{workers.urls[retry_on]}/mcp", headers=headers, json=call) as held:
                assert held.headers["content-type"].startswith("text/event-stream"), where
                row = Elicitation.objects.get(elicitation_id=link.rstrip("/").rsplit("/", 1)[-1])
                assert row.status == "pending", where
                person.save_secret(workers.on(page_on, link), f"sk-held-{n}")
                final = next(m for m in sse_messages(held.iter_lines()) if m.get("id") == 2)
            assert without_meta(final["result"]) == {
                "resultType": "complete",
                "content": [{"type": "text", "text": STORED}],
                "isError": False,
            }, where
            assert Elicitation.objects.get(pk=row.pk).status == "completed", where


def test_modern_cancel_on_the_page_then_retry_on_the_other_worker(site, person):
    port_a, token = site
    with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
        link, state = first_round(http, workers.urls["a"], token)
        page = person.open(workers.on("b", link))
        cancelled = person.submit(workers.on("b", link), page, action="cancel")
        assert cancelled.status_code == 200 and "Cancelled" in cancelled.text
        result = retry(http, workers.urls["a"], token, state, 2)
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"] == "You did not open the page; nothing was stored."
    assert Elicitation.objects.get().status == "cancelled" and not StoredSecret.objects.exists()
