"""An MCP client talking to `memplane mcp`: list the tools, remember something, recall it.

Shows what an MCP host (Claude Desktop, an IDE, your own agent) does with Memplane's MCP server,
using the official MCP Python SDK (`mcp`): it starts `memplane mcp` as a subprocess over stdio,
which calls the Memplane server with MEMPLANE_API_KEY, lists its tools, calls `remember` and
then `recall`, and prints the structured results. See docs/mcp.md for the tools and for
configuring Claude Desktop and Dify.

Run it against `make serve` with the tenant admin key printed at its first start, with the
project's Python (it runs `python -m memplane.mcp`, the same server as `memplane mcp`, from the
same environment; an agent host needs only `pip install 'memplane-client[mcp]'` for it):

    MEMPLANE_API_KEY=mpk_... .venv/bin/python examples/mcp_client.py

MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server, MEMPLANE_AGENT_ID an agent for
a key not bound to one; `memplane mcp` reads them too.
"""
import asyncio
import os
import sys

from mcp import Client, StdioServerParameters

if not os.environ.get("MEMPLANE_API_KEY"):
    sys.exit("set MEMPLANE_API_KEY to a key of your tenant (make serve prints a tenant admin key at first start)")

# The MCP server of this Python's environment, given ours: the MCP SDK would otherwise hand it only
# a minimal environment, without MEMPLANE_ADDRESS, MEMPLANE_API_KEY and MEMPLANE_AGENT_ID.
SERVER = StdioServerParameters(command=sys.executable, args=["-m", "memplane.mcp"], env=dict(os.environ))


def text_of(result) -> str:
    return " ".join(block.text for block in result.content if block.type == "text")


async def main() -> int:
    async with Client(SERVER) as client:
        tools = (await client.list_tools()).tools
        print("tools:", ", ".join(tool.name for tool in tools))

        stored = await client.call_tool("remember", {
            "content": "The team's standup is at 09:30 in room Aurora", "kind": "fact", "scope": "global"})
        if stored.is_error:  # a refused call is a tool error carrying the server's code and reason
            print(f"remember failed: {text_of(stored)}", file=sys.stderr)
            return 1
        print(f"remember -> {stored.structured_content['id']}: {stored.structured_content['content']}")

        found = await client.call_tool("recall", {"query": "when is the standup?", "top_k": 3})
        if found.is_error:
            print(f"recall failed: {text_of(found)}", file=sys.stderr)
            return 1
        for hit in found.structured_content["hits"]:
            print(f"recall -> {hit['score']:.3f} {hit['memory']['content']}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
