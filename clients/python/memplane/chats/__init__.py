"""`memplane import-chats`: conversations from chat exports (ChatGPT, Claude, Slack, a documented
JSONL form) written as sessions of turns through the Python SDK, so the tenant's content policy,
encryption and quotas apply as to any write. A client of the server, like mcp/ and panel/."""
