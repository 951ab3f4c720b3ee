"""Stands in for the OpenTelemetry collector image in the compose check: an OTLP/gRPC receiver on
4317 that prints one line per span it is sent ("span <name> from <service.name>") and a count per
metrics export, so the check reads what the server delivered from the container's log. Its
arguments (--config=...) are accepted and ignored."""
from __future__ import annotations

from concurrent import futures

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def service_name(resource) -> str:
    return next((a.value.string_value for a in resource.attributes if a.key == "service.name"), "?")


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        for spans in request.resource_spans:
            for scope in spans.scope_spans:
                for span in scope.spans:
                    print(f"span {span.name} from {service_name(spans.resource)}", flush=True)
        return trace_service_pb2.ExportTraceServiceResponse()


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request, context):
        print(f"metrics export of {len(request.resource_metrics)} resources", flush=True)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    server.add_insecure_port("0.0.0.0:4317")
    server.start()
    print("collector listening on 0.0.0.0:4317", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
