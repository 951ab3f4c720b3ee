"""The MCP adapter's own parts (memplane_server/mcp): schemas, results, where the key comes from."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime, timezone

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from memplane import Kind, Layer, Memory, MemoryStatus, Scope
from memplane.mcp.server import bearer_key, build_server, host_and_port
from memplane.mcp.tools import MemoryView, given, view


class Unreachable:
    """A connector for calls that must be refused before any client is asked for."""

    def client(self, ctx):
        raise AssertionError("the tool body ran")


@asynccontextmanager
async def unreachable(_server):
    yield Unreachable()


def tools() -> dict:
    listed = asyncio.run(build_server(unreachable).list_tools())
    return {tool.name: tool for tool in listed}


def test_kind_and_scope_choices_are_the_sdk_enums_names():
    properties = tools()["remember"].input_schema["properties"]
    assert properties["kind"]["enum"] == [k.name.lower() for k in Kind if k is not Kind.UNSPECIFIED]
    scope_choices = next(arm["enum"] for arm in properties["scope"]["anyOf"] if "enum" in arm)
    assert scope_choices == ["global", "domain", "private"]


def test_required_arguments_are_the_ones_without_defaults():
    schemas = {name: tool.input_schema.get("required", []) for name, tool in tools().items()}
    assert schemas == {
        "remember": ["content", "kind"], "recall": ["query"], "reflect": [], "forget": [],
        "memory_history": ["entity"], "working_memory": ["session_id"],
    }


def test_every_tool_publishes_its_result_schema():
    assert all(tool.output_schema for tool in tools().values())


def test_an_argument_outside_the_schema_is_refused_before_memplane_is_called():
    async def call():
        async with Client(build_server(unreachable)) as client:
            return await client.call_tool("remember", {"content": "x", "kind": "rumour"})

    result = asyncio.run(call())
    assert result.is_error and "kind" in result.content[0].text


def test_bearer_key_is_read_from_the_authorization_header_in_any_case():
    assert bearer_key({"Authorization": "bearer  mpk_a_b "}) == "mpk_a_b"


@pytest.mark.parametrize("headers", [{}, {"authorization": "Basic dXNlcg=="}, {"authorization": "Bearer "}])
def test_a_request_without_a_bearer_token_is_unauthenticated_like_on_grpc(headers):
    with pytest.raises(ToolError, match=r"UNAUTHENTICATED \[API_KEY_REQUIRED\]"):
        bearer_key(headers)


def test_unset_arguments_are_left_to_the_server_and_false_or_zero_are_kept():
    assert given(a=None, b="", c=[], d=False, e=0, f="x") == {"d": False, "e": 0, "f": "x"}


def test_a_memory_result_names_its_enums_as_the_tool_inputs_do():
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    memory = Memory(
        id="m1", tenant_id="t", scope=Scope.GLOBAL, domain="", agent_id="", user_id="", session_id="",
        layer=Layer.SEMANTIC, kind=Kind.FACT, content="c", context="", entity="user", attribute="city",
        value="Hangzhou", tags=("a", "b"), metadata={}, confidence=0.9, status=MemoryStatus.ACTIVE, supersedes="",
        source_type="", source_id="", occurred_at=None, valid_from=now, valid_to=None, create_time=now,
        update_time=now, last_used_time=None, expire_time=None, use_count=0, embedding_model="e5",
    )
    shown = view(MemoryView, memory)
    assert (shown.scope, shown.layer, shown.kind, shown.status) == ("global", "semantic", "fact", "active")
    assert shown.tags == ["a", "b"] and shown.valid_from == now


@pytest.mark.parametrize("listen, expected", [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("[::1]:80", ("::1", 80))])
def test_listen_address_splits_into_host_and_port(listen, expected):
    assert host_and_port(listen) == expected
