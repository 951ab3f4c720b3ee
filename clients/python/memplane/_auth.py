"""Per-call authentication metadata."""
from __future__ import annotations

Metadata = tuple[tuple[str, str], ...]


def auth_metadata(api_key: str, agent_id: str | None = None) -> Metadata:
    """Builds the metadata sent with every call.

    Args:
        api_key: The key secret, sent as `authorization: Bearer <api_key>`.
        agent_id: Agent to act as (`x-memplane-agent`), for keys not bound to an agent.
    """
    # Keys are often read from files or env vars with a trailing newline, which gRPC would
    # reject as an invalid header value with a far less helpful message.
    key = api_key.strip() if isinstance(api_key, str) else ""
    if not key:
        raise ValueError("api_key must be a non-empty string")
    metadata: list[tuple[str, str]] = [("authorization", f"Bearer {key}")]
    if agent_id is not None:
        agent = agent_id.strip()
        if not agent:
            raise ValueError("agent_id must be non-empty when given")
        metadata.append(("x-memplane-agent", agent))
    return tuple(metadata)
