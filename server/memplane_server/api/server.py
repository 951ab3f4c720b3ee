"""Builds the grpc.aio server: servicers, interceptors, health and reflection."""
from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from memplane.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
    operations_service_pb2,
    operations_service_pb2_grpc,
)

from ..services.access.availability import Availability
from ..services.registry import Services
from .admin_servicer import AdminServicer
from .drain import Drain
from .interceptors import (
    AuthInterceptor,
    DrainInterceptor,
    ErrorInterceptor,
    IdempotencyInterceptor,
    MetricsInterceptor,
    RateLimitInterceptor,
    ReadRoutingInterceptor,
    UsageInterceptor,
)
from .memory_servicer import MemoryServicer
from .operations_servicer import OperationsServicer

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    operations_service_pb2.DESCRIPTOR.services_by_name["OperationsService"].full_name,
)
# A health service name that answers SERVING from start to exit, also while the database is down or
# the server drains: a liveness probe on it restarts only a process that stopped answering.
LIVENESS_SERVICE = "liveness"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
HEALTH_PROBE_SECONDS = 1.0

log = logging.getLogger(__name__)


def build_server(services: Services, drain: Drain, *, traced: bool = True, metered: bool = True
                 ) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """The gRPC server; traced: each call's span (OpenTelemetry's interceptor), which costs a call
    about 0.1 ms when no exporter sends its spans."""
    interceptors = [
        *([aio_server_interceptor()] if traced else []),  # outermost: the trace spans everything below
        MetricsInterceptor(),
        ErrorInterceptor(services.availability),
        DrainInterceptor(drain),
        AuthInterceptor(services.auth, services.rate_limits),
        RateLimitInterceptor(services.rate_limits),
        *([UsageInterceptor(services.metering.tally)] if metered else []),  # the calls served, each tenant's own
        ReadRoutingInterceptor(services.reads),  # outside idempotency: a replayed write has a position too
        IdempotencyInterceptor(services.idempotency),
    ]
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(
        MemoryServicer(services, drain.stopping),
        server,
    )
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(services), server)
    operations_service_pb2_grpc.add_OperationsServiceServicer_to_server(
        OperationsServicer(services), server
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
    if serving:
        await health_servicer.set(LIVENESS_SERVICE, status)


async def watch_database(availability: Availability, health_servicer: health.aio.HealthServicer, drain: Drain) -> None:
    """Health follows the database: NOT_SERVING while it does not answer, SERVING once it does."""
    serving = True
    while not drain.draining:
        answers = await availability.database_answers()
        if answers != serving and not drain.draining:
            serving = answers
            log.warning("database %s: health %s", "back" if serving else "unreachable",
                        "SERVING" if serving else "NOT_SERVING")
            await set_serving(health_servicer, serving)
        await asyncio.sleep(HEALTH_PROBE_SECONDS)
