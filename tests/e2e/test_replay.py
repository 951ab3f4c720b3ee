"""A request id belongs to its caller: another agent sending the very same request gets its own
write, never the first caller's response."""
from __future__ import annotations

import uuid

import grpc

from memplane.v1 import memory_pb2 as m
from memplane.v1 import memory_service_pb2 as s
from memplane.v1 import memory_service_pb2_grpc as s_grpc


def test_another_agents_replay_is_a_new_write(server, new_tenant):
    _, key = new_tenant()
    request = s.WriteRequest(request_id=str(uuid.uuid4()), memories=[
        s.MemoryInput(kind=m.KIND_FACT, content="a1's private plan", scope=m.SCOPE_PRIVATE)])
    with grpc.insecure_channel(server.target) as channel:
        stub = s_grpc.MemoryServiceStub(channel)

        def as_agent(agent: str):
            return [("authorization", f"Bearer {key}"), ("x-memplane-agent", agent)]

        first = stub.Write(request, metadata=as_agent("a1"))
        again = stub.Write(request, metadata=as_agent("a1"))
        other = stub.Write(request, metadata=as_agent("a2"))
        assert again.memories[0].id == first.memories[0].id
        assert other.memories[0].id != first.memories[0].id and other.memories[0].agent_id == "a2"
        changed = s.WriteRequest(request_id=request.request_id, memories=[
            s.MemoryInput(kind=m.KIND_FACT, content="something else", scope=m.SCOPE_PRIVATE)])
        # a2 reusing its own id for another request is refused; a1's use of the id tells it nothing.
        try:
            stub.Write(changed, metadata=as_agent("a2"))
            raise AssertionError("a reused id with another request must fail")
        except grpc.RpcError as err:
            assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
        a2_sees = stub.GetMemory(s.GetMemoryRequest(id=other.memories[0].id), metadata=as_agent("a2")).memory
        assert a2_sees.content == "a1's private plan" and a2_sees.agent_id == "a2"
