"""`memplane mcp`: an MCP server whose tools call a running Memplane through the Python SDK.

tools.py defines the tools (one typed signature each, from which the MCP SDK makes the input
schema); server.py says where a call's API key comes from (the environment over stdio, the
request's bearer token over HTTP) and runs the transport; command.py is the command (`memplane mcp`,
`memplane-mcp`, `python -m memplane.mcp`), which needs the mcp extra.
"""
