"""Sending fuzzed requests (tests/support/fuzz.py builds them): the world they draw valid values
from, who sends each (keys of every role, acting agents), and what counts as a failure: an
INTERNAL or UNKNOWN answer, or a stream that breaks."""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import grpc
from google.protobuf import descriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from tests.support.fuzz import Pool, RequestGenerator, describe

FAILING_CODES = ("INTERNAL", "UNKNOWN")
# Who sends: (role, share) per service; admin calls mostly with the platform key.
KEY_SHARES = {
    "AdminService": [("platform", 0.5), ("tenant", 0.25), ("agent", 0.05), ("reader", 0.05), ("writer", 0.05),
                     ("bogus", 0.05), ("none", 0.05)],
    "default": [("tenant", 0.3), ("agent", 0.25), ("writer", 0.15), ("reader", 0.15), ("platform", 0.07),
                ("bogus", 0.05), ("none", 0.03)],
}
ACTING_AGENTS = ["a1", "a2", "ghost", "Bad Agent!", "x" * 100]


@dataclass
class Failure:
    method: str
    role: str
    code: str
    details: str
    request: str

    def __str__(self) -> str:
        return f"{self.method} as {self.role}: {self.code} {self.details!r}\n  request:\n{self.request}"


@dataclass
class Planned:
    method: descriptor.MethodDescriptor
    role: str
    acting_agent: str | None
    payload: Message | bytes


def plan_group(gen: RequestGenerator, method: descriptor.MethodDescriptor, count: int) -> list[Planned]:
    """The group's requests, all drawn before any is sent so the seed alone decides them."""
    rng = gen.rng
    shares = KEY_SHARES.get(method.containing_service.name, KEY_SHARES["default"])
    roles, weights = zip(*shares)
    planned = []
    for _ in range(count):
        role = rng.choices(roles, weights)[0]
        acting = rng.choice(ACTING_AGENTS) if role in ("tenant", "writer", "reader") and rng.random() < 0.1 else None
        payload: Message | bytes = gen.raw(method) if rng.random() < 0.1 else gen.request(method)
        planned.append(Planned(method, role, acting, payload))
    return planned


async def send_group(channel, planned: list[Planned], keys: dict[str, str], *, concurrency: int = 4,
                     timeout: float = 60.0) -> tuple[dict[str, int], dict[str, int], list[Failure]]:
    """Sends the group; returns counts of status codes and of error reasons, and the INTERNAL/UNKNOWN answers."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    failures: list[Failure] = []
    queue = list(reversed(planned))

    async def one(p: Planned) -> None:
        path = f"/{p.method.containing_service.full_name}/{p.method.name}"
        call = channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        if p.method.server_streaming:
            call = _first_messages(channel.unary_stream(path, request_serializer=lambda b: b,
                                                        response_deserializer=lambda b: b))
        metadata = []
        if p.role != "none":
            metadata.append(("authorization", f"Bearer {keys.get(p.role, 'mpk_0000000000000000_nope')}"))
        if p.acting_agent is not None:
            metadata.append(("x-memplane-agent", p.acting_agent))
        data = p.payload if isinstance(p.payload, bytes) else p.payload.SerializeToString()
        try:
            await call(data, metadata=metadata, timeout=timeout)
            code, details = "OK", ""
        except grpc.aio.AioRpcError as err:
            code, details = err.code().name, err.details() or ""
            reason = _reason(err)
            reasons[reason] = reasons.get(reason, 0) + 1
        counts[code] = counts.get(code, 0) + 1
        if code in FAILING_CODES:
            shown = (f"raw bytes (hex): {p.payload[:2000].hex()}" if isinstance(p.payload, bytes)
                     else describe(p.payload))
            failures.append(Failure(p.method.name, p.role + (f" acting as {p.acting_agent!r}" if p.acting_agent else ""),
                                    code, details[:300], shown))

    async def worker() -> None:
        while queue:
            await one(queue.pop())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts, reasons, failures


STREAM_SECONDS = 1.0


def _first_messages(stream):
    """A server stream (Watch) read like a unary call: what it sends within STREAM_SECONDS. A
    stream still open then is healthy (OK); an error before is its answer."""

    async def call(data, *, metadata, timeout):
        rpc = stream(data, metadata=metadata, timeout=timeout)
        try:
            async def drain():
                async for _ in rpc:
                    pass

            await asyncio.wait_for(drain(), STREAM_SECONDS)
        except asyncio.TimeoutError:
            pass
        finally:
            rpc.cancel()

    return call


def _reason(err) -> str:
    """The ErrorInfo reason of a failed call, or its code when there is none."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    return err.code().name


def build_world(target: str, platform_key: str, tenant: str) -> tuple[dict[str, str], Pool]:
    """A tenant with agents, keys of every role, domains (read-write and read-only), memories
    of each layer, a working session, an operation and open conflicts: the valid values requests
    draw from."""
    from memplane import AdminClient, MemoryClient

    pool = Pool(tenants=[tenant, "acme", "no-such-tenant"], agents=["a1", "a2", "ghost"])
    keys = {"platform": platform_key, "bogus": "mpk_0123456789abcdef_not-a-real-secret"}
    with AdminClient(target, platform_key) as admin:
        created = admin.create_tenant(tenant, create_admin_key=True)
        keys["tenant"] = created.admin_key.secret
        for agent in ("a1", "a2"):
            admin.create_agent(tenant, agent)
        keys["agent"] = admin.create_api_key(tenant_id=tenant, agent_id="a1", role="agent").secret
        keys["writer"] = admin.create_api_key(tenant_id=tenant, role="writer").secret
        keys["reader"] = admin.create_api_key(tenant_id=tenant, role="reader").secret
        for _ in range(3):  # keys the fuzzer may revoke; its own must keep working
            pool.key_ids.append(admin.create_api_key(tenant_id=tenant, role="reader").api_key.id)
        for name, access in ((f"{tenant}-rw", "read_write"), (f"{tenant}-ro", "read")):
            admin.create_domain(name)
            admin.grant_domain(name, tenant, access)
            pool.domains.append(name)
    pool.domains.append("no-such-domain")
    with MemoryClient(target, keys["tenant"]) as client:
        written = client.write([
            {"content": "The user lives in Shanghai", "kind": "fact", "entity": "user", "attribute": "city",
             "value": "Shanghai", "session_id": "s1", "tags": ["t1"]},
            {"content": "user: where do I live?", "kind": "turn", "session_id": "s1", "user_id": "u1"},
            {"content": "Deploys need the VPN on", "kind": "lesson", "scope": "domain", "domain": f"{tenant}-rw"},
            {"content": "editing the README", "kind": "turn", "layer": "working", "session_id": "s2", "ttl": 3600},
        ])
        pool.memory_ids += [m.id for m in written.memories]
        operation = client.reflect(session_id="s1", mode="async").operation
        pool.operation_ids.append(operation.id)
    # Agents a1 and a2 disagreeing about shared facts: open conflicts to resolve.
    for n in range(8):
        for agent, value in (("a1", "08:00"), ("a2", "09:30")):
            with MemoryClient(target, keys["tenant"], agent_id=agent) as client:
                [m] = client.write([{"content": f"Flight {n} leaves at {value}", "kind": "fact", "entity": f"flight-{n}",
                                     "attribute": "time", "value": value, "scope": "global"}]).memories
        pool.challengers.append(m.id)
    pool.memory_ids.append(str(uuid.UUID(int=1)))
    pool.operation_ids.append(str(uuid.UUID(int=2)))
    return keys, pool
