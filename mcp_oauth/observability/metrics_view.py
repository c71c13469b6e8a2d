"""The metrics endpoint (``MCP_OAUTH["METRICS_PATH"]``, ``/metrics``): what a Prometheus server scrapes.

Answers, in this order:

* 404 while ``METRICS_ENABLED`` is off (nothing tells a prober the endpoint exists);
* 405 for a method other than GET or HEAD;
* 403 when the caller's address (``REMOTE_ADDR``) is in none of ``METRICS_ALLOWED_NETWORKS``
  (CIDR strings; loopback by default; an empty list allows every address);
* 401 with ``WWW-Authenticate: Bearer realm="metrics"`` when ``METRICS_BEARER_TOKEN`` is set and
  the request's ``Authorization: Bearer …`` is missing or different (compared in constant time);
* 200: the Prometheus text format (0.0.4), or OpenMetrics 1.0 when the ``Accept`` header asks for
  ``application/openmetrics-text`` (prometheus_client's content negotiation). Under several
  processes with ``PROMETHEUS_MULTIPROC_DIR`` the counts of every process, summed.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from mcp_oauth.observability import metrics
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["address_allowed", "metrics_view", "parse_networks", "token_accepted"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=8)
def parse_networks(networks: tuple[str, ...]) -> tuple[Network, ...]:
    """The CIDR strings as networks (host bits allowed: ``10.0.0.7/8`` is ``10.0.0.0/8``).

    :raises ValueError: a string that is not an IPv4 or IPv6 network (``manage.py check``:
        ``mcp_oauth.E135``).
    """
    return tuple(ipaddress.ip_network(str(network).strip(), strict=False) for network in networks)


def address_allowed(remote_addr: str | None) -> bool:
    """Whether ``remote_addr`` is in one of ``METRICS_ALLOWED_NETWORKS`` (always, when the list is empty)."""
    configured = mcp_oauth_settings.METRICS_ALLOWED_NETWORKS
    if not configured:
        return True
    try:
        address = ipaddress.ip_address(str(remote_addr or "").split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in parse_networks(tuple(configured)))


def token_accepted(authorization: str) -> bool:
    """Whether the ``Authorization`` header carries ``METRICS_BEARER_TOKEN`` (always, when none is set)."""
    expected = mcp_oauth_settings.METRICS_BEARER_TOKEN
    if not expected:
        return True
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), str(expected).encode())


def _refusal(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response


@csrf_exempt
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The scrape answer (see the module docstring for every status)."""
    registry = metrics.registry()
    if registry is None:
        return _refusal(404, "Not Found")
    if request.method not in ("GET", "HEAD"):
        response = _refusal(405, "Method Not Allowed")
        response["Allow"] = "GET, HEAD"
        return response
    if not address_allowed(request.META.get("REMOTE_ADDR")):
        return _refusal(403, "Forbidden")
    if not token_accepted(request.META.get("HTTP_AUTHORIZATION", "")):
        response = _refusal(401, "Unauthorized")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    from prometheus_client.exposition import choose_encoder

    encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    response = HttpResponse(encoder(registry), content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
