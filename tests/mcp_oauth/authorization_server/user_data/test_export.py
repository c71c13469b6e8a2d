"""The user's data export (GDPR Art. 15/20) and the admin's export and erase actions (issue 28)."""

from __future__ import annotations

import json
import tracemalloc
import warnings

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from elicitation.models import StoredSecret, ThirdPartyConnection
from mcp_oauth.authorization_server.user_data.export import UserDataExport, export_response, export_user_data
from mcp_oauth.models import AuditEvent, McpTask
from mcp_oauth.signals import user_data_export
from tests.support.lifecycle_helpers import RevocationEndpoint, leftovers, populate

pytestmark = pytest.mark.django_db

EXPORT_URL = "/oauth/connected-apps/"


@pytest.fixture
def revocation():
    endpoint = RevocationEndpoint()
    yield endpoint
    endpoint.close()


@pytest.fixture
def populated(user, other_user, resource, public_app, revocation):
    state = populate(user, other_user, public_app, resource, revocation.url, task_status="completed")
    McpTask.objects.filter(user=user).update(result={"content": [{"type": "text", "text": "plain"}]})
    McpTask.objects.create(
        tool_name="sealed",
        user=user,
        application=public_app,
        resource=resource,
        protocol_version="2026-07-28",
        status="completed",
        sealed_result="gAAAA-sealed-result",
    )
    # Bob's data must never appear in Alice's export.
    AuditEvent.objects.create(kind="token.issued", user=other_user, client_id="bobs-client", detail={"bob": True})
    return state


def _download(user, **post) -> tuple[object, bytes]:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    page = browser.get(EXPORT_URL)
    assert page.status_code == 200
    assert b'id="export-data"' in page.content
    token = page.cookies["csrftoken"].value
    response = browser.post(EXPORT_URL, {"action": "export", "csrfmiddlewaretoken": token, **post})
    return response, b"".join(response.streaming_content)


def _secrets(user) -> list[str]:
    values = ["provider-access-token", "provider-refresh-token", "sk-live-123", "gAAAA-sealed-result"]
    for model in (get_access_token_model(), get_refresh_token_model()):
        for row in model.objects.filter(user=user):
            values += [row.token, row.token_checksum]
    values += [c.access_token_encrypted for c in ThirdPartyConnection.objects.filter(user=user)]
    values += [s.value_encrypted for s in StoredSecret.objects.filter(user=user)]
    values += list(McpTask.objects.filter(user=user).values_list("task_id", flat=True))
    return [value for value in values if value]


def test_the_user_downloads_their_own_data_and_no_secret(user, populated):
    response, body = _download(user)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="mcp-data-alice-')
    assert "no-store" in response["Cache-Control"]
    document = json.loads(body)
    assert document["user"] == {"id": user.pk, "username": "alice"}
    sections = document["sections"]
    assert {
        "consents",
        "access_tokens",
        "refresh_tokens",
        "authorization_codes",
        "id_tokens",
        "mcp_sessions",
        "mcp_tasks",
        "enterprise_identities",
        "audit_events",
        "elicitations",
        "third_party_connections",
        "stored_secrets",
    } <= set(sections)
    assert sections["consents"][0]["client_name"] == "Test client"
    assert sections["third_party_connections"][0]["account_label"] == "alice@docs"
    assert sections["stored_secrets"] == [
        {"name": "API_KEY", **{k: sections["stored_secrets"][0][k] for k in ("created_at", "updated_at")}}
    ]
    tasks = {task["tool_name"]: task for task in sections["mcp_tasks"]}
    assert tasks["sealed"]["result"] is None and tasks["sealed"]["result_encrypted"] is True
    assert tasks["slow"]["result"] == {"content": [{"type": "text", "text": "plain"}]}
    text = body.decode()
    for secret in _secrets(user):
        assert secret not in text, secret
    assert "bobs-client" not in text and '"bob"' not in text


def test_the_export_needs_the_csrf_token_and_a_login(user, populated):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert browser.post(EXPORT_URL, {"action": "export"}).status_code == 403
    anonymous = Client()
    response = anonymous.post(EXPORT_URL, {"action": "export"})
    assert response.status_code == 302 and "login" in response["Location"]


def test_ten_thousand_audit_rows_stream_as_valid_json_in_bounded_memory(user):
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                kind="token.issued", user=user, created_at=now, client_id=f"c{i}", detail={"n": i, "pad": "x" * 200}
            )
            for i in range(10_000)
        ],
        batch_size=2000,
    )
    tracemalloc.start()
    chunks = 0
    size = 0
    parts = []
    for chunk in export_user_data(user).stream():
        chunks += 1
        size += len(chunk)
        parts.append(len(chunk))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert chunks > 20  # streamed, not built whole
    assert max(parts) < 200_000
    assert size > 2_500_000
    assert peak < size / 2, (peak, size)  # never the whole document (nor all the rows) in memory
    # And it parses.
    document = json.loads("".join(export_user_data(user).stream()))
    assert len(document["sections"]["audit_events"]) == 10_000


def test_the_download_streams_chunk_by_chunk_under_asgi(user, monkeypatch):
    """Under ASGI (make run, make serve) Django read a synchronous streaming body whole into a list
    before sending a byte (and warned): the export sat in memory at once. Now each chunk is sent
    as soon as it is read, with no warning."""
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(kind="token.issued", user=user, created_at=now, client_id=f"c{i}", detail={"pad": "x" * 200})
            for i in range(2_000)
        ]
    )
    read: list[int] = []
    stream = UserDataExport.stream

    def counted(self):
        for chunk in stream(self):
            read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(UserDataExport, "stream", counted)
    response = export_response(user)

    async def receive():
        chunks_read_when_sent, body = [], []
        async for part in response:  # what Django's ASGI handler does
            chunks_read_when_sent.append(len(read))
            body.append(part)
        return chunks_read_when_sent, b"".join(body)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sent, body = async_to_sync(receive)()
    assert len(sent) >= 4
    assert sent == list(range(1, len(sent) + 1))  # one chunk read, one sent, never ahead
    assert len(json.loads(body)["sections"]["audit_events"]) == 2_000


def test_a_site_adds_its_own_section(user):
    def receiver(sender, user, export, **kwargs):
        export.add_section("newsletter", [{"subscribed": True, "user": user.pk}])

    user_data_export.connect(receiver, dispatch_uid="test.newsletter")
    try:
        document = json.loads("".join(export_user_data(user).stream()))
    finally:
        user_data_export.disconnect(dispatch_uid="test.newsletter")
    assert document["sections"]["newsletter"] == [{"subscribed": True, "user": user.pk}]


def _admin(django_user_model, *codenames, superuser=False):
    if superuser:
        person = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    else:
        person = django_user_model.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
        person.user_permissions.add(*Permission.objects.filter(codename__in=["view_user", "change_user", *codenames]))
    browser = Client()
    browser.force_login(person)
    return browser


def test_the_admin_exports_one_user(user, populated, django_user_model):
    browser = _admin(django_user_model, superuser=True)
    response = browser.post("/admin/auth/user/", {"action": "export_user_data", "_selected_action": [user.pk]})
    assert response.status_code == 200
    document = json.loads(b"".join(response.streaming_content))
    assert document["user"]["username"] == "alice"
    assert len(document["sections"]["audit_events"]) >= 1


def test_staff_without_the_permission_cannot_export_or_erase(user, populated, django_user_model):
    browser = _admin(django_user_model)
    page = browser.get("/admin/auth/user/")
    assert page.status_code == 200
    assert b"export_user_data" not in page.content and b"erase_user_data" not in page.content
    for action in ("export_user_data", "erase_user_data"):
        response = browser.post(
            "/admin/auth/user/", {"action": action, "_selected_action": [user.pk], "confirm": "yes"}
        )
        # An action the user may not run is not a choice of the form: the list again, nothing done.
        assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
        assert not hasattr(response, "streaming_content") and b'id="confirm-erase"' not in response.content
    assert McpTask.objects.filter(user=user).exists()
    staff = django_user_model.objects.get(username="staff")
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["export_user_data", "erase_user_data"]))
    permitted = Client()
    permitted.force_login(django_user_model.objects.get(pk=staff.pk))
    assert b"export_user_data" in permitted.get("/admin/auth/user/").content


def test_the_admin_erases_after_a_confirmation(user, populated, django_user_model, django_capture_on_commit_callbacks):
    browser = _admin(django_user_model, superuser=True)
    confirm = browser.post("/admin/auth/user/", {"action": "erase_user_data", "_selected_action": [user.pk]})
    assert confirm.status_code == 200 and b'id="confirm-erase"' in confirm.content
    assert McpTask.objects.filter(user=user).exists()  # nothing erased before the confirmation
    with django_capture_on_commit_callbacks(execute=True):
        done = browser.post(
            "/admin/auth/user/", {"action": "erase_user_data", "_selected_action": [user.pk], "confirm": "yes"}
        )
    assert done.status_code == 302
    assert leftovers(user.pk, populated) == {}
    assert django_user_model.objects.filter(pk=user.pk).exists()
    event = AuditEvent.objects.get(kind="user.erased")
    assert (
        event.detail["reason"] == "erased" and event.detail["by"] == django_user_model.objects.get(username="root").pk
    )
