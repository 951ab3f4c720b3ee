"""OpenTelemetry providers for traces and metrics; exporters chosen by MEMPLANE_TELEMETRY_EXPORTER."""
from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from . import __version__


def setup_telemetry(exporter: str) -> None:
    """Installs SDK providers once; with exporter 'none' spans and metrics are recorded but not sent."""
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    resource = Resource.create({"service.name": "memplane", "service.version": __version__})
    tracer_provider = TracerProvider(resource=resource)
    readers = []
    if exporter == "console":
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def shutdown_telemetry() -> None:
    """Flushes what the exporters hold; the process may then end without its exit handlers."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        if isinstance(provider, (TracerProvider, MeterProvider)):
            provider.shutdown()
