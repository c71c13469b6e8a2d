"""The admin's client list with many dynamic registrations (issue #28): its queries do not grow with
the rows, no COUNT(*) reads the whole table, search and the trust filter stay bounded.
(Timed with a million rows by bench/bench_dcr_admin.py; not timed here.)"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_application_model

from mcp_oauth.admin import large_lists
from mcp_oauth.models import ClientProfile

pytestmark = pytest.mark.django_db

Application = get_application_model()
CHANGELIST = "/admin/oauth2_provider/application/"


def register(count: int, start: int = 0, **fields) -> list:
    apps = []
    for index in range(start, start + count):
        app = Application.objects.create(
            name=f"Flood client {index}",
            client_type="public",
            authorization_grant_type="authorization-code",
            redirect_uris=f"http://127.0.0.1:{1024 + index}/cb",
            registration_source="dcr",
            **fields,
        )
        ClientProfile.objects.create(application=app)
        apps.append(app)
    return apps


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize(
    "query",
    ["", "?registration_source__exact=dcr", "?used=never", "?grant_type=authorization-code", "?q=Flood", "?o=7"],
)
def test_the_changelist_query_count_does_not_grow_with_rows(admin_client, resource, query):
    register(3)
    few = queries_of(admin_client, CHANGELIST + query)
    register(60, start=3)
    many = queries_of(admin_client, CHANGELIST + query)
    assert len(many) == len(few), "\n".join(many)


def test_no_count_reads_the_whole_table(admin_client, resource):
    register(5)
    counts = [sql for sql in queries_of(admin_client, CHANGELIST) if "COUNT(" in sql.upper()]
    assert counts
    for sql in counts:
        assert re.search(r"LIMIT \d+", sql), sql


def test_past_the_cap_the_list_says_more_than(admin_client, resource, monkeypatch):
    monkeypatch.setattr(large_lists.CappedCountPaginator, "cap", 3)
    register(5)
    page = admin_client.get(CHANGELIST).content.decode()
    assert "More than 3 applications: narrow the list with a filter or a search." in page
    # "Select all" would act on rows nobody counted: not offered past the cap.
    assert "Select all 3" not in page and "action-counter" in page
    narrowed = admin_client.get(CHANGELIST + "?client_type__exact=confidential").content.decode()
    assert "0 applications" in narrowed and "More than" not in narrowed


def test_search_finds_an_exact_client_id_anywhere_and_words_among_the_newest(admin_client, resource, monkeypatch):
    monkeypatch.setattr(large_lists, "SEARCH_WINDOW", 3)
    oldest, *_ = register(6)
    by_id = admin_client.get(CHANGELIST + f"?q={oldest.client_id}").content.decode()
    assert "Flood client 0<" in by_id and "1 application" in by_id
    by_word = admin_client.get(CHANGELIST + "?q=Flood").content.decode()
    assert "3 applications" in by_word and "Flood client 5<" in by_word and "Flood client 0<" not in by_word


def test_the_trust_filter_judges_a_bounded_window(admin_client, resource, monkeypatch):
    import mcp_oauth.admin.clients as admin_module

    monkeypatch.setattr(admin_module, "TRUST_FILTER_WINDOW", 2)
    register(5)
    page = admin_client.get(CHANGELIST + "?trust=unknown").content.decode()
    assert "2 applications" in page


def test_unsupported_grant_types_are_still_offered_as_a_filter(admin_client, resource):
    register(2)
    assert "Not supported by this server" not in admin_client.get(CHANGELIST).content.decode()
    Application.objects.create(name="old", client_type="public", authorization_grant_type="implicit")
    assert "Not supported by this server" in admin_client.get(CHANGELIST).content.decode()
