"""Builds the grpc.aio server: servicers, interceptors, health and reflection."""
from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from memplane.v1 import admin_service_pb2, memory_service_pb2, operations_service_pb2
from memplane.v1 import admin_service_pb2_grpc, memory_service_pb2_grpc, operations_service_pb2_grpc
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from ..services.admin import AdminService
from ..services.auth import Authenticator
from ..services.deps import Deps
from ..services.extract import ExtractService
from ..services.forget import ForgetService
from ..services.memories import MemoriesService
from ..services.operations import OperationsService
from ..services.reflect import ReflectService
from ..services.search import SearchService
from ..services.working import WorkingService
from ..services.write import WriteService
from ..services.availability import Availability
from ..services.idempotency import Idempotency
from ..services.rate_limits import RateLimits
from .admin_servicer import AdminServicer
from .drain import Drain
from .interceptors import (
    AuthInterceptor, DrainInterceptor, ErrorInterceptor, IdempotencyInterceptor, MetricsInterceptor,
    RateLimitInterceptor,
)
from .memory_servicer import MemoryServicer
from .operations_servicer import OperationsServicer

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    operations_service_pb2.DESCRIPTOR.services_by_name["OperationsService"].full_name,
)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def build_server(
    deps: Deps, idempotency: Idempotency, limits: RateLimits, availability: Availability, drain: Drain,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    interceptors = [
        aio_server_interceptor(),  # outermost: the trace spans everything below
        MetricsInterceptor(),
        ErrorInterceptor(availability),
        DrainInterceptor(drain),
        AuthInterceptor(Authenticator(deps.tenancy)),
        RateLimitInterceptor(limits),
        IdempotencyInterceptor(idempotency),
    ]
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    writes = WriteService(deps)
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(
        MemoryServicer(SearchService(deps), ReflectService(deps), ForgetService(deps), MemoriesService(deps),
                       WorkingService(deps, writes), ExtractService(deps, writes)),
        server,
    )
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(AdminService(deps.tenancy)), server)
    operations_service_pb2_grpc.add_OperationsServiceServicer_to_server(
        OperationsServicer(OperationsService(deps)), server
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                                         reflection.SERVICE_NAME), server)
    return server, health_servicer


async def set_serving(health_servicer: health.aio.HealthServicer, serving: bool) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, status)
