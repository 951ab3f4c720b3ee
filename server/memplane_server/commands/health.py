"""`memplane health`: asks a server's standard grpc.health.v1 service whether it is SERVING.

Used as a container HEALTHCHECK and an exec probe, so it imports only grpc and the health stubs.
"""
from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# A server bound to every interface is reached on loopback from inside its own container.
_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}


def probe_address(listen: str) -> str:
    """The address to dial for a server that listens on `listen` (host:port)."""
    host, _, port = listen.rpartition(":")
    return f"{_WILDCARD_HOSTS.get(host, host)}:{port}"


def check(address: str, *, service: str = "", timeout: float = 3.0) -> tuple[bool, str]:
    """(serving, what was seen) for one Check call that ends within `timeout` seconds."""
    with grpc.insecure_channel(probe_address(address)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            return False, f"{exc.code().name}: {exc.details()}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, status


def run(address: str, *, service: str, timeout: float) -> int:
    serving, seen = check(address, service=service, timeout=timeout)
    print(f"{probe_address(address)} {seen}", file=sys.stdout if serving else sys.stderr)
    return 0 if serving else 1
