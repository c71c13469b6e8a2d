"""Tracing switch: whether OpenTelemetry tracing is on in this process, and its installation.

This module never imports ``opentelemetry``: with tracing off (the ``[otel]`` extra absent, the
``TRACING`` setting False, or ``"auto"`` without an OTLP endpoint in the environment) nothing of
OpenTelemetry is loaded and the MCP endpoint pays nothing (no observer is installed).

``MCP_OAUTH["TRACING"]``:

* ``"auto"`` (default): on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set and ``OTEL_SDK_DISABLED`` is not ``true`` — the
  standard variables an operator sets to point a process at a collector;
* ``True``: on (system check ``mcp_oauth.E131`` when the ``[otel]`` extra is not installed);
* ``False``: off.

:func:`install` runs once at start-up (:mod:`mcp_oauth.wiring`); when tracing is on it loads
:mod:`mcp_oauth.observability.tracing_runtime`, which installs the MCP observer and connects the
Celery and session receivers. The SDK's providers and their export threads are created lazily, on
first use in each process (a gunicorn worker, a Celery pool process), never in a parent that forks.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from importlib import import_module
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.core.checks import CheckMessage, Error, register

from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "check_tracing",
    "cimd_fetch_attributes",
    "installed_runtime",
    "install",
    "otel_available",
    "traced",
    "tracing_enabled",
    "uninstall",
]

#: The backend that imports OpenTelemetry (the ``[otel]`` extra), loaded by :func:`install`.
RUNTIME_MODULE = "mcp_oauth.observability.tracing_runtime"

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_runtime: ModuleType | None = None
_F = TypeVar("_F", bound=Callable[..., Any])


def otel_available() -> bool:
    """Whether the ``[otel]`` extra (the OpenTelemetry SDK and its OTLP/HTTP exporter) is installed
    (looked up without importing it)."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
        )
    except ModuleNotFoundError:
        return False


def tracing_enabled(setting: Any = None, environ: os._Environ[str] | dict[str, str] | None = None) -> bool:
    """Whether tracing is on for ``setting`` (default: ``MCP_OAUTH["TRACING"]``) and ``environ``
    (default: the process environment). See the module docstring."""
    value = mcp_oauth_settings.TRACING if setting is None else setting
    env = os.environ if environ is None else environ
    if value == "auto":
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return False
        return any(env.get(name, "").strip() for name in _ENDPOINT_VARIABLES) and otel_available()
    return bool(value) and otel_available()


def install(add_observer: Callable[[Any], None]) -> bool:
    """Install tracing in this process when :func:`tracing_enabled` (idempotent): its MCP observer
    with ``add_observer`` (``mcp_oauth.mcp_server.transport.observers.add_observer``, passed
    by the composition module), the Celery and session receivers.

    :returns: whether tracing is installed.
    """
    global _runtime
    if _runtime is None and tracing_enabled():
        # The OpenTelemetry-bound backend, loaded by name only when tracing is on (as Django loads
        # a cache backend): with tracing off, ``opentelemetry`` is never imported.
        tracing_runtime = import_module(RUNTIME_MODULE)
        tracing_runtime.install(add_observer)
        _runtime = tracing_runtime
    return _runtime is not None


def uninstall(remove_observer: Callable[[Any], None]) -> None:
    """Remove the observer (with ``remove_observer``) and the receivers :func:`install` added
    (the providers stay)."""
    global _runtime
    if _runtime is not None:
        _runtime.uninstall(remove_observer)
        _runtime = None


def installed_runtime() -> ModuleType | None:
    """:mod:`~mcp_oauth.observability.tracing_runtime` when tracing is installed, else None."""
    return _runtime


def traced(name: str, describe: Callable[..., dict[str, Any]] | None = None) -> Callable[[_F], _F]:
    """Decorate a function whose calls are CLIENT spans named ``name`` when tracing is on
    (attributes: ``describe(*args, **kwargs)``; a raised exception sets ``error.type`` to its
    ``reason`` attribute or its class name, status ERROR). With tracing off: one test of a
    module global per call."""

    def decorate(function: _F) -> _F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            runtime = _runtime
            if runtime is None:
                return function(*args, **kwargs)
            attributes = describe(*args, **kwargs) if describe is not None else {}
            return runtime.call_in_span(name, attributes, function, args, kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def cimd_fetch_attributes(fetcher: Any, url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The attributes of a CIMD (or key set) fetch span: the URL fetched, which is public (a
    client's identifier or its ``jwks_uri``), its host, and whether the request is conditional."""
    return {
        "http.request.method": "GET",
        "url.full": url,
        "server.address": urlsplit(url).hostname or "",
        "cimd.conditional": bool(kwargs.get("etag") or kwargs.get("last_modified")),
    }


@register()
def check_tracing(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """``mcp_oauth.E130``: ``TRACING`` is not True, False or ``"auto"``; ``mcp_oauth.E131``: it
    is True but the ``[otel]`` extra is not installed."""
    value = mcp_oauth_settings.TRACING
    if value not in (True, False, "auto"):
        return [Error(f'MCP_OAUTH["TRACING"] must be True, False or "auto", not {value!r}.', id="mcp_oauth.E130")]
    if value is True and not otel_available():
        return [
            Error(
                'MCP_OAUTH["TRACING"] is True but the OpenTelemetry SDK is not installed.',
                hint='pip install "django-mcp-authz[otel]", or set TRACING to "auto" or False.',
                id="mcp_oauth.E131",
            )
        ]
    return []
