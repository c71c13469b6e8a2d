"""Celery tasks of the CIMD cache (registered through ``mcp_oauth.tasks``, which imports this module).

Both run :func:`mcp_oauth.authorization_server.cimd.leased_fetch.perform_fetch` and only act while the lease
token they carry still owns the document's row (see :mod:`mcp_oauth.authorization_server.cimd.cache`),
so a duplicate or late task never makes a second outbound fetch. Under
``task_always_eager`` (the embedded default) they run inline in the request that
claimed the fetch.
"""

from __future__ import annotations

from celery import shared_task

from mcp_oauth.authorization_server.cimd.leased_fetch import perform_fetch
from mcp_oauth.observability.metrics import count_cimd_fetch


@shared_task(name="mcp_oauth.cimd.fetch_client_metadata", ignore_result=True)
def fetch_client_metadata(client_id: str, lease_token: str, requester_ip: str | None = None) -> str:
    """First sight of a client_id URL: fetch, validate and store its document; an authorization request waits for it.

    :param client_id: the CIMD client_id URL.
    :param lease_token: the single-flight lease the caller claimed on the URL's row.
    :param requester_ip: client IP of the request that caused the fetch (audit log only).
    :returns: ``"fetched"``, ``"not_modified"``, ``"failed"`` or ``"skipped"``.
    """
    return count_cimd_fetch(perform_fetch(client_id, lease_token, requester_ip))


@shared_task(name="mcp_oauth.cimd.refresh_client_metadata", ignore_result=True)
def refresh_client_metadata(client_id: str, lease_token: str, requester_ip: str | None = None) -> str:
    """Revalidate a cached document with a conditional request (``If-None-Match`` / ``If-Modified-Since``).

    Started in the background before the document expires (stale-while-revalidate),
    or when a request finds it expired. Arguments and result as :func:`fetch_client_metadata`.
    """
    return count_cimd_fetch(perform_fetch(client_id, lease_token, requester_ip))
