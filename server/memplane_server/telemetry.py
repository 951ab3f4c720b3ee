"""OpenTelemetry providers for traces and metrics; exporters chosen by MEMPLANE_TELEMETRY_EXPORTER."""
from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from . import __version__


def setup_telemetry(exporter: str, *, otlp_endpoint: str = "", metrics_listen: str | None = None) -> None:
    """Installs SDK providers once; with exporter 'none' metrics are recorded but not sent, and spans
    are not recorded (see tracer_provider).

    'otlp' sends both over OTLP/gRPC (plaintext, to a collector beside the process); metrics_listen
    (host:port) also serves them for Prometheus to scrape at /metrics.
    """
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    resource = Resource.create({"service.name": "memplane", "service.version": __version__})
    tracer_provider = make_tracer_provider(exporter, resource)
    readers = []
    if exporter == "console":
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000))
    elif exporter == "otlp":
        # Imported only when chosen: the exporters pull in more of grpc and protobuf than 'none' needs.
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint, insecure=True)))
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=otlp_endpoint, insecure=True),
                                                     export_interval_millis=15_000))
    if metrics_listen:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        host, port = metrics_listen.rsplit(":", 1)
        start_http_server(int(port), addr=host.strip("[]"))
        readers.append(PrometheusMetricReader())
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def make_tracer_provider(exporter: str, resource: Resource) -> TracerProvider:
    """Spans that no exporter sends are not recorded: a search's dozen statements each made a full
    span (ids, attributes, timestamps) for nothing, a tenth of the event loop's time in a search
    (bench/README.md, quality.py). Their context still passes on, as non-recording spans."""
    return TracerProvider(resource=resource, sampler=ALWAYS_OFF if exporter == "none" else None)


def shutdown_telemetry() -> None:
    """Flushes what the exporters hold; the process may then end without its exit handlers."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        if isinstance(provider, (TracerProvider, MeterProvider)):
            provider.shutdown()
