"""The MCP server over stdio or streamable HTTP, each tool call made with its caller's API key.

Over stdio the process serves one caller, so the key comes from the environment and one client
serves every call. Over HTTP every request names its caller with its own bearer token; a client
is made from that token for that one call and closed after it, so a call never runs with
another request's key, and the tenancy of a call is exactly its key's.
"""
from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from memplane import AsyncMemoryClient
from memplane.tool_settings import ToolSettings

from .._version import __version__
from .tools import TOOLS, Connector, forget, memory_history, recall, working_memory

HTTP_PATH = "/mcp"
AGENT_HEADER = "x-memplane-agent"

ANNOTATIONS = {
    recall: ToolAnnotations(read_only_hint=True),
    memory_history: ToolAnnotations(read_only_hint=True),
    working_memory: ToolAnnotations(read_only_hint=True),
    forget: ToolAnnotations(destructive_hint=True),
}

INSTRUCTIONS = (
    "Long-term memory for this agent and its team. recall before answering from memory; remember "
    "facts, preferences, procedures and lessons worth keeping; reflect on a finished task; forget "
    "on request. Errors name the server's reason, e.g. PERMISSION_DENIED [READ_ONLY_KEY]."
)

Lifespan = Callable[[MCPServer], AbstractAsyncContextManager[Connector]]


class SharedClient:
    """stdio: every call goes through the one client of the environment's key."""

    def __init__(self, client: AsyncMemoryClient) -> None:
        self._client = client

    @asynccontextmanager
    async def client(self, ctx: Context) -> AsyncIterator[AsyncMemoryClient]:
        yield self._client


class BearerClient:
    """HTTP: each call gets a client of its own request's bearer token, closed when it ends."""

    def __init__(self, address: str) -> None:
        self._address = address

    @asynccontextmanager
    async def client(self, ctx: Context) -> AsyncIterator[AsyncMemoryClient]:
        headers = ctx.headers or {}
        agent = headers.get(AGENT_HEADER) or None
        async with AsyncMemoryClient(self._address, bearer_key(headers), agent_id=agent) as client:
            yield client


def bearer_key(headers: Mapping[str, str]) -> str:
    """The API key of an `Authorization: Bearer <key>` header (looked up case-insensitively, as
    HTTP headers are)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    scheme, _, key = lowered.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        # The same code and reason the gRPC server gives a call without a key.
        raise ToolError("UNAUTHENTICATED [API_KEY_REQUIRED]: send `Authorization: Bearer <api key>`")
    return key.strip()


def build_server(lifespan: Lifespan) -> MCPServer:
    """The MCP server with every tool; lifespan yields the Connector the tools get clients from."""
    server = MCPServer("memplane", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)
    for tool in TOOLS:
        server.add_tool(tool, annotations=ANNOTATIONS.get(tool))
    return server


def host_and_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def run(settings: ToolSettings, *, http: bool) -> int:
    """Serves until stopped (stdin closed over stdio, SIGTERM or Ctrl-C over HTTP)."""
    address = settings.address
    if http:
        return _run_http(address, settings.mcp_listen)
    if settings.api_key is None or not settings.api_key.strip():
        print("memplane mcp: set MEMPLANE_API_KEY to the API key to call Memplane with", file=sys.stderr)
        return 2
    key = settings.api_key

    @asynccontextmanager
    async def from_environment(_: MCPServer) -> AsyncIterator[Connector]:
        # Opened inside the server's event loop, which a grpc.aio channel belongs to.
        async with AsyncMemoryClient(address, key, agent_id=settings.agent_id or None) as client:
            yield SharedClient(client)

    build_server(from_environment).run("stdio")
    return 0


def _run_http(address: str, listen: str) -> int:
    @asynccontextmanager
    async def from_requests(_: MCPServer) -> AsyncIterator[Connector]:
        yield BearerClient(address)

    host, port = host_and_port(listen)
    # Stateless: a request needs no session of an earlier one, so any instance can answer it
    # and nothing one caller set up is ever found by another.
    build_server(from_requests).run(
        "streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH, stateless_http=True
    )
    return 0
