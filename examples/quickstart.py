"""Quickstart: write a few memories, search them, print what was found.

Shows the blocking MemoryClient: write() a batch (a structured fact, a preference, a lesson),
then search() with explain=True to see why each hit ranks where it does.

Run it against `make serve` with the tenant admin key printed at its first start:

    MEMPLANE_API_KEY=mpk_... .venv/bin/python examples/quickstart.py

MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server, MEMPLANE_AGENT_ID an agent
for a key not bound to one.
"""
import os
import sys

from memplane import MemoryClient, MemoryInput, MemplaneError

ADDRESS = os.environ.get("MEMPLANE_ADDRESS", "127.0.0.1:50051")
API_KEY = os.environ.get("MEMPLANE_API_KEY") or sys.exit(
    "set MEMPLANE_API_KEY to a key of your tenant (make serve prints a tenant admin key at first start)")

MEMORIES = [
    MemoryInput("The user lives in Shanghai", kind="fact", entity="user", attribute="city", value="Shanghai"),
    MemoryInput("The user prefers answers in bullet points", kind="preference"),
    MemoryInput("Deploys to staging need the VPN switched on", kind="lesson", context="deploying"),
]


def main() -> None:
    with MemoryClient(ADDRESS, API_KEY, agent_id=os.environ.get("MEMPLANE_AGENT_ID")) as client:
        written = client.write(MEMORIES).memories
        for memory in written:
            print(f"wrote {memory.kind.name.lower():<10} {memory.id}  {memory.content}")

        for query in ("where does the user live?", "what do I need before deploying?"):
            print(f"\nsearch: {query}")
            for hit in client.search(query, top_k=3, explain=True).hits:
                # Ranked components are the retrieval channels that found the hit; the rest are score factors.
                channels = ", ".join(part.name for part in hit.explanation if part.rank)
                print(f"  {hit.score:.3f}  {hit.memory.content}  (found by: {channels})")


if __name__ == "__main__":
    try:
        main()
    except MemplaneError as error:  # the server's code and stable reason, e.g. UNAUTHENTICATED [INVALID_API_KEY]
        sys.exit(f"memplane call failed: {error}")
