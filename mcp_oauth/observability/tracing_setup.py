"""The OpenTelemetry SDK providers of this process, created on first use (extra ``[otel]``).

Configured entirely by the SDK from the standard environment variables — this module passes no
endpoint, sampler or resource of its own:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``…_COMPRESSION``,
  ``…_TIMEOUT`` (the OTLP/HTTP protobuf exporters);
* ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` (the resource);
* ``OTEL_TRACES_SAMPLER``, ``OTEL_TRACES_SAMPLER_ARG`` (default ``parentbased_always_on``);
* ``OTEL_BSP_*`` (span batching), ``OTEL_METRIC_EXPORT_INTERVAL`` (metric export period, ms);
* ``OTEL_SDK_DISABLED=true``: the SDK hands out no-op tracers and meters.

When the site already installed global providers (``opentelemetry-instrument``, its own set-up),
those are used and nothing is created here. Otherwise the providers built here become the global
ones, so other instrumentation in the process (the ``mcp`` SDK's client spans, say) joins the
same traces.

Per process: the providers are created on the first span or measurement of a process, so a
gunicorn master or a Celery parent that forks creates no export thread before the fork; the SDK
restarts its batch threads in a forked child itself (``os.register_at_fork``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["INSTRUMENTATION_NAME", "Providers", "flush", "providers"]

#: The instrumentation scope of every span and instrument of the app.
INSTRUMENTATION_NAME = "mcp_oauth"

_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Providers:
    """This process's providers; ``owned``: created here (flushed by :func:`flush`)."""

    tracer: trace.Tracer
    meter: metrics.Meter
    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    owned: bool
    pid: int


_providers: Providers | None = None


def providers() -> Providers:
    """The tracer and meter of this process, creating the providers on the first call."""
    current = _providers
    if current is not None:
        return current
    with _lock:
        return _providers or _create()


def _create() -> Providers:
    global _providers
    tracer_provider = trace.get_tracer_provider()
    meter_provider = metrics.get_meter_provider()
    owned = isinstance(tracer_provider, trace.ProxyTracerProvider)
    if owned:
        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        sdk_tracer_provider = TracerProvider(resource=resource)  # sampler: OTEL_TRACES_SAMPLER
        sdk_tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(sdk_tracer_provider)
        tracer_provider = sdk_tracer_provider
        if not isinstance(meter_provider, MeterProvider):  # none set yet (the API's proxy)
            reader = PeriodicExportingMetricReader(OTLPMetricExporter())  # OTEL_METRIC_EXPORT_INTERVAL
            sdk_meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
            metrics.set_meter_provider(sdk_meter_provider)
            meter_provider = sdk_meter_provider
    _providers = Providers(
        tracer=tracer_provider.get_tracer(INSTRUMENTATION_NAME),
        meter=meter_provider.get_meter(INSTRUMENTATION_NAME),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        owned=owned,
        pid=os.getpid(),
    )
    return _providers


def flush(timeout_millis: int = 10_000) -> None:
    """Export what the providers hold now (spans and metrics): at a process's orderly end, and
    in tests. A no-op when the providers are not created or not ours."""
    current = _providers
    if current is None or not current.owned:
        return
    for provider in (current.tracer_provider, current.meter_provider):
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            force_flush(timeout_millis)
