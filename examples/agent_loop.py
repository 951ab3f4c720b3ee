"""Agent loop: recall before each reply, record the session's turns, then reflect on it.

Shows the asyncio AsyncMemoryClient in the loop an agent runs: for each user message it searches
memory for context, answers (a canned reply stands in for your model), and writes both turns to
the session; at the end reflect() distils the session into a summary and, when the server has an
LLM (MEMPLANE_LLM_MODEL and friends on the server), into lessons, facts and preferences, which a
later session then finds. Without an LLM the server still writes a rule-based summary.

Run it against `make serve` with the tenant admin key printed at its first start:

    MEMPLANE_API_KEY=mpk_... .venv/bin/python examples/agent_loop.py

MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server, MEMPLANE_AGENT_ID an agent for
a key not bound to one, MEMPLANE_USER_ID the user the session is about (default demo-user).
"""
import asyncio
import os
import sys
import uuid

from memplane import AsyncMemoryClient, Kind, MemplaneError

ADDRESS = os.environ.get("MEMPLANE_ADDRESS", "127.0.0.1:50051")
API_KEY = os.environ.get("MEMPLANE_API_KEY") or sys.exit(
    "set MEMPLANE_API_KEY to a key of your tenant (make serve prints a tenant admin key at first start)")
USER = os.environ.get("MEMPLANE_USER_ID", "demo-user")

CONVERSATION = [
    ("I'm planning a trip to Kyoto in April.", "April is cherry blossom season; book early."),
    ("Please always book me a window seat, I can't sleep otherwise.", "Noted: window seats from now on."),
    ("Find me a flight from Shanghai on the 3rd.", "The 09:40 flight has a window seat left."),
]


async def main() -> None:
    session = f"trip-{uuid.uuid4().hex[:8]}"
    async with AsyncMemoryClient(ADDRESS, API_KEY, agent_id=os.environ.get("MEMPLANE_AGENT_ID")) as memory:
        for message, reply in CONVERSATION:
            context = await memory.search(message, top_k=3, user_id=USER)
            print(f"user: {message}\n  recalled {len(context.hits)} memories")
            # A turn is one line of the transcript, "speaker: text"; the session ties them together.
            await memory.write([{"content": f"{speaker}: {text}", "kind": "turn", "session_id": session,
                                 "user_id": USER} for speaker, text in (("user", message), ("assistant", reply))])
            print(f"assistant: {reply}")

        reflection = await memory.reflect(session_id=session, user_id=USER)
        print(f"\nreflected on {session} ({'with' if reflection.used_llm else 'without'} an LLM)")
        print(f"summary: {reflection.summary}")
        for distilled in reflection.memories:
            if distilled.kind is not Kind.SUMMARY:
                print(f"learned {distilled.kind.name.lower()}: {distilled.content}")

        # A later session, another day: what was learned comes back for a related request.
        later = await memory.search("book a flight for the user", top_k=3, user_id=USER, kinds=["preference", "fact"])
        for hit in later.hits:
            print(f"next session recalls: {hit.memory.content}")
        if not later.hits:
            print("next session recalls nothing: the server has no LLM to learn with")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except MemplaneError as error:  # the server's code and stable reason
        sys.exit(f"memplane call failed: {error}")
