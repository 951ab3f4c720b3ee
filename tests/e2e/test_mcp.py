"""`memplane mcp` against a real server: the mcp SDK's own client over stdio (the command spawned as
a subprocess) and over streamable HTTP (`--http` on a free port)."""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import asynccontextmanager

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memplane import AdminClient
from tests.e2e.conftest import free_port

TOOLS = {"remember", "recall", "reflect", "forget", "memory_history", "working_memory"}
COMMAND = [sys.executable, "-m", "memplane_server.cli", "mcp"]


def mcp_env(target: str, **extra: str) -> dict[str, str]:
    # The spawned command gets only what it needs: the checkout on its path and the server to call.
    return {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "MEMPLANE_ADDRESS": target, **extra}


@pytest.fixture(scope="module")
def tenant_keys(server, platform_key):
    """A fresh tenant's writer and reader keys."""
    tenant = f"mcp-{uuid.uuid4().hex[:8]}"
    with AdminClient(server.target, platform_key) as admin:
        admin.create_tenant(tenant)
        writer = admin.create_api_key(tenant_id=tenant, role="writer").secret
        reader = admin.create_api_key(tenant_id=tenant, role="reader").secret
    return tenant, writer, reader


@pytest.fixture(scope="module")
def mcp_http(server, tmp_path_factory):
    """`memplane mcp --http` on a free port; yields its URL."""
    port = free_port()
    env = {**os.environ, **mcp_env(server.target, MEMPLANE_MCP_LISTEN=f"127.0.0.1:{port}")}
    env.pop("MEMPLANE_API_KEY", None)
    # A file, not a pipe: nobody reads the log while tests run, and a full pipe would block the server.
    log = tmp_path_factory.mktemp("mcp") / "mcp-http.log"
    with log.open("w") as out:
        process = subprocess.Popen([*COMMAND, "--http"], env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError("memplane mcp --http did not start:\n" + log.read_text()) from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    # uvicorn shuts down gracefully, then re-raises the signal it got, as a service stopped by it should.
    assert process.wait(30) in (0, -signal.SIGTERM), log.read_text()


@asynccontextmanager
async def stdio_session(target: str, key: str, **env: str):
    params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:],
                                   env=mcp_env(target, MEMPLANE_API_KEY=key, **env))
    async with Client(params) as client:
        yield client


@asynccontextmanager
async def http_session(url: str, key: str | None, **extra_headers: str):
    headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **extra_headers}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def text_of(result) -> str:
    return " ".join(block.text for block in result.content)


async def remember_and_recall(client, marker: str) -> None:
    """The tools are listed, a fact is stored, and recall finds it with every hit's score explained."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOLS

    stored = await client.call_tool(
        "remember",
        {"content": f"The {marker} deploy needs the VPN switched on", "kind": "lesson", "scope": "global",
         "tags": [marker]},
    )
    assert not stored.is_error, text_of(stored)
    assert stored.structured_content["kind"] == "lesson" and stored.structured_content["scope"] == "global"
    assert stored.structured_content["outcome"] == "created"
    again = await client.call_tool(
        "remember", {"content": f"the {marker} deploy needs the VPN switched on.", "kind": "lesson", "scope": "global"})
    assert again.structured_content["outcome"] == "merged", text_of(again)
    assert again.structured_content["related_memory_id"] == again.structured_content["id"] == stored.structured_content["id"]

    found = await client.call_tool("recall", {"query": f"what does the {marker} deploy need?", "explain": True})
    assert not found.is_error, text_of(found)
    hits = found.structured_content["hits"]
    top = hits[0]
    assert top["memory"]["id"] == stored.structured_content["id"]
    assert {part["name"] for part in top["explanation"]} & {"vector", "keyword"}


async def bad_arguments_are_tool_errors(client) -> None:
    """An argument outside the schema is refused by the MCP layer, one the server refuses carries
    the server's code and reason."""
    off_schema = await client.call_tool("remember", {"content": "x", "kind": "rumour"})
    assert off_schema.is_error and "kind" in text_of(off_schema)

    refused = await client.call_tool("remember", {"content": "x", "kind": "fact", "scope": "domain"})
    assert refused.is_error
    assert "INVALID_ARGUMENT [DOMAIN_REQUIRED]" in text_of(refused)


async def test_stdio_lists_remembers_recalls_and_reports_errors(server, tenant_keys):
    _, writer, reader = tenant_keys
    async with stdio_session(server.target, writer) as client:
        await remember_and_recall(client, "stdio")
        await bad_arguments_are_tool_errors(client)
    async with stdio_session(server.target, reader) as client:
        denied = await client.call_tool("remember", {"content": "readers cannot write", "kind": "fact"})
        assert denied.is_error and "PERMISSION_DENIED [READ_ONLY_KEY]" in text_of(denied)
        # The same key still reads: recall is what a reader may do.
        found = await client.call_tool("recall", {"query": "stdio deploy VPN"})
        assert not found.is_error and found.structured_content["hits"]


async def test_stdio_without_a_key_exits_with_the_reason(server):
    process = subprocess.run(COMMAND, env={**os.environ, **mcp_env(server.target), "MEMPLANE_API_KEY": ""},
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert process.returncode == 2 and "MEMPLANE_API_KEY" in process.stderr


async def test_http_lists_remembers_recalls_and_reports_errors(mcp_http, tenant_keys):
    _, writer, reader = tenant_keys
    async with http_session(mcp_http, writer) as client:
        await remember_and_recall(client, "http")
        await bad_arguments_are_tool_errors(client)
    async with http_session(mcp_http, reader) as client:
        denied = await client.call_tool("remember", {"content": "readers cannot write", "kind": "fact"})
        assert denied.is_error and "PERMISSION_DENIED [READ_ONLY_KEY]" in text_of(denied)
    async with http_session(mcp_http, None) as client:
        anonymous = await client.call_tool("recall", {"query": "deploy"})
        assert anonymous.is_error and "UNAUTHENTICATED [API_KEY_REQUIRED]" in text_of(anonymous)
    async with http_session(mcp_http, "mpk_nobody_nothing") as client:
        unknown = await client.call_tool("recall", {"query": "deploy"})
        assert unknown.is_error and "UNAUTHENTICATED" in text_of(unknown)


async def test_two_bearer_tokens_on_one_http_server_see_only_their_own_tenant(mcp_http, new_tenant):
    (tenant_a, key_a), (tenant_b, key_b) = new_tenant(), new_tenant()

    async def own_view(key: str, secret: str) -> list[dict]:
        async with http_session(mcp_http, key) as client:
            stored = await client.call_tool(
                "remember", {"content": f"The vault code is {secret}", "kind": "fact", "scope": "global"}
            )
            assert not stored.is_error, text_of(stored)
            found = await client.call_tool("recall", {"query": "what is the vault code?", "top_k": 20})
            assert not found.is_error, text_of(found)
            return found.structured_content["hits"]

    # Both callers at once, so a client or key kept from one request could only leak into the other.
    hits_a, hits_b = await asyncio.gather(own_view(key_a, "alpha-111"), own_view(key_b, "bravo-222"))
    assert {hit["memory"]["tenant_id"] for hit in hits_a} == {tenant_a}
    assert {hit["memory"]["tenant_id"] for hit in hits_b} == {tenant_b}
    assert any("alpha-111" in hit["memory"]["content"] for hit in hits_a)
    assert not any("bravo-222" in hit["memory"]["content"] for hit in hits_a)
    assert any("bravo-222" in hit["memory"]["content"] for hit in hits_b)
    assert not any("alpha-111" in hit["memory"]["content"] for hit in hits_b)


async def test_http_reflect_forget_history_and_working_memory(mcp_http, tenant_keys):
    _, writer, _ = tenant_keys
    async with http_session(mcp_http, writer) as client:
        for city in ("Shanghai", "Hangzhou"):
            moved = await client.call_tool("remember", {
                "content": f"The user lives in {city}", "kind": "fact", "entity": "user", "attribute": "city",
                "value": city,
            })
            assert not moved.is_error, text_of(moved)
        history = await client.call_tool("memory_history", {"entity": "user", "attribute": "city"})
        assert not history.is_error, text_of(history)
        changes = {(entry["action"], entry["memory"]["value"]) for entry in history.structured_content["entries"]}
        assert {("created", "Shanghai"), ("superseded", "Shanghai"), ("created", "Hangzhou")} <= changes

        noted = await client.call_tool("remember", {
            "content": "step 2 of 3", "kind": "event", "layer": "working", "session_id": "chat-9",
            "state_key": "progress", "ttl_seconds": 600,
        })
        assert not noted.is_error, text_of(noted)
        working = await client.call_tool("working_memory", {"session_id": "chat-9"})
        assert not working.is_error, text_of(working)
        assert working.structured_content["state"] == {"progress": "step 2 of 3"}

        reflected = await client.call_tool("reflect", {
            "request": "deploy the billing service", "outcome": "failure", "feedback": "the VPN was off",
            "steps": [{"action": "kubectl apply", "observation": "connection refused"}],
        })
        assert not reflected.is_error, text_of(reflected)
        assert reflected.structured_content["summary"]
        # Neither a task nor a session: the SDK refuses it before sending, still as a tool error.
        aimless = await client.call_tool("reflect", {})
        assert aimless.is_error and "INVALID_ARGUMENT" in text_of(aimless)

        kept = await client.call_tool("remember", {"content": "The staging password rotates on Mondays",
                                                   "kind": "fact", "scope": "global"})
        forgotten = await client.call_tool("forget", {"ids": [kept.structured_content["id"]], "reason": "asked to"})
        assert not forgotten.is_error, text_of(forgotten)
        assert forgotten.structured_content["forgotten_ids"] == [kept.structured_content["id"]]
        found = await client.call_tool("recall", {"query": "when does the staging password rotate?"})
        assert kept.structured_content["id"] not in {hit["memory"]["id"] for hit in found.structured_content["hits"]}


async def test_http_agent_header_picks_the_agent_a_tenant_key_acts_as(mcp_http, new_tenant):
    _, key = new_tenant()  # a tenant admin key: bound to the tenant, not to an agent

    async def as_agent(agent: str, tool: str, arguments: dict):
        async with http_session(mcp_http, key, **{"X-Memplane-Agent": agent}) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error, text_of(result)
        return result.structured_content

    stored = await as_agent("a1", "remember", {"content": "a1 keeps its notes in the blue folder",
                                                "kind": "fact", "scope": "private"})
    assert stored["agent_id"] == "a1"
    mine = await as_agent("a1", "recall", {"query": "where are the notes kept?"})
    theirs = await as_agent("a2", "recall", {"query": "where are the notes kept?"})
    assert stored["id"] in {hit["memory"]["id"] for hit in mine["hits"]}
    assert stored["id"] not in {hit["memory"]["id"] for hit in theirs["hits"]}


async def test_stdio_agent_setting_picks_the_agent_a_tenant_key_acts_as(server, new_tenant):
    _, key = new_tenant()  # a tenant admin key: bound to the tenant, not to an agent
    async with stdio_session(server.target, key, MEMPLANE_AGENT_ID="a2") as client:
        stored = await client.call_tool("remember", {"content": "a2 works nights", "kind": "fact", "scope": "private"})
    assert not stored.is_error, text_of(stored)
    assert stored.structured_content["agent_id"] == "a2"
