"""Reflection benchmark: the job engine next to the same work called directly, and what
stale-summary marking adds to a fact write.

One run starts embedded PostgreSQL and Redis, a real `memplane serve` (foundation.py) and an
instant local OpenAI-compatible model (tests/support/fake_llm.py: litellm's real code path, no
provider latency, so the engine's own cost is what shows), then measures through the SDK:

1. reflections per second of N failed tasks run synchronously (Reflect, one after another: the
   least work a reflection needs) next to N queued at once (REFLECT_MODE_ASYNC) and finished by
   the server's job runner, timed from the first enqueue until the database shows all succeeded
   (polled every 20 ms). Rounds alternate direct and engine. Target: engine <= 1.5x direct.
2. p50 of a fact write that supersedes a value stated by a session summary (the trigger marks
   the summary stale and queues its refresh in the write's transaction) next to the same write
   of a fact no summary states, alternating call by call, on a second server without background
   work (the queued refreshes wait instead of competing with the timed writes). Target: <= 1.10x.
EXPLAIN of the trigger's lookup is printed.

Run:  .venv/bin/python bench/reflection.py [--tasks 40] [--rounds 3] [--writes 60] [--json out.json]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["OMP_NUM_THREADS"] = "2"

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import asyncpg
from foundation import environment, running_server

from memplane import MemoryClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.fake_llm import FakeLLM, Reply  # noqa: E402

ANSWER = json.dumps({
    "memories": [{"kind": "lesson", "content": "Run the migrations before deploying", "context": "deploys",
                  "confidence": 0.9}],
    "summary": "The deploy failed because the schema was missing.",
})


def task(n: int, tag: str) -> dict:
    return {"task_id": f"{tag}-{n}", "request": f"Deploy service {n}", "outcome": "failure",
            "steps": [{"action": "run deploy", "observation": "error: schema missing"}]}


async def all_succeeded(dsn: str, ids: list[str]) -> None:
    """Waits until every job succeeded, polling every 20 ms on one connection (a connection per poll
    would fork a PostgreSQL backend 50 times a second and slow what it measures)."""
    conn = await asyncpg.connect(dsn)
    try:
        wanted = [uuid.UUID(i) for i in ids]
        while await conn.fetchval(
                "SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state = 'succeeded'", wanted) < len(ids):
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


def engine_round(client: MemoryClient, dsn: str, n: int, tag: str) -> float:
    started = time.perf_counter()
    ids = [client.reflect(task=task(i, tag), mode="async").operation.id for i in range(n)]
    asyncio.run(all_succeeded(dsn, ids))
    return time.perf_counter() - started


def direct_round(client: MemoryClient, n: int, tag: str) -> float:
    started = time.perf_counter()
    for i in range(n):
        client.reflect(task=task(i, tag), mode="sync")
    return time.perf_counter() - started


def fact(entity: str, value: str, session: str) -> dict:
    return {"content": f"{entity} lives in {value}", "kind": "fact", "entity": entity, "attribute": "city",
            "value": value, "session_id": session, "scope": "global"}


def stale_marking(client: MemoryClient, writes: int) -> dict:
    """p50 of superseding a summarised fact next to superseding one no summary states."""
    summarised, plain = [], []
    for n in range(writes):
        client.write([fact(f"s{n}", "Shanghai", f"chat-{n}"), fact(f"p{n}", "Shanghai", f"other-{n}")])
        client.reflect(session_id=f"chat-{n}", mode="sync")
    for n in range(writes):
        for entity, out in ((f"s{n}", summarised), (f"p{n}", plain)):
            started = time.perf_counter()
            client.write([fact(entity, "Shenzhen", "x")])
            out.append((time.perf_counter() - started) * 1000)
    return {"summarised_p50_ms": statistics.median(summarised), "plain_p50_ms": statistics.median(plain),
            "ratio": statistics.median(summarised) / statistics.median(plain)}


async def explain(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        source = await conn.fetchval("SELECT source_id FROM memory_sources LIMIT 1")
        rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) SELECT DISTINCT ON (tenant_id, memory_id) tenant_id,"
                                " memory_id, source_id FROM memory_sources WHERE source_id = ANY($1)"
                                " ORDER BY tenant_id, memory_id, source_id", [source])
        return "\n".join("    " + r[0] for r in rows)
    finally:
        await conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--writes", type=int, default=60)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env, started = environment(), time.perf_counter()
    fake = FakeLLM().start()
    fake.script(*[Reply(ANSWER)] * (2 * args.tasks * args.rounds + 2 * args.writes + 20))
    os.environ.update({"MEMPLANE_LLM_MODEL": "openai/bench-model", "MEMPLANE_LLM_API_BASE": fake.api_base,
                       "MEMPLANE_LLM_API_KEY": "bench", "MEMPLANE_RATE_LIMIT_PER_SECOND": "1000000",
                       "MEMPLANE_RATE_LIMIT_BURST": "1000000", "MEMPLANE_CONTEXT_WINDOW": "0"})
    print(f"environment: {env['cpu_count']} cores, load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}", flush=True)
    with running_server("memplane-bench-reflect-") as server, MemoryClient(server.address, server.key) as client:
        direct_round(client, 3, "warm")
        rounds = []
        for r in range(args.rounds):
            d = direct_round(client, args.tasks, f"d{r}")
            e = engine_round(client, server.dsn, args.tasks, f"e{r}")
            rounds.append({"direct_s": d, "engine_s": e, "ratio": e / d})
            print(f"round {r + 1}: direct {args.tasks / d:.1f} reflections/s, engine {args.tasks / e:.1f}/s,"
                  f" ratio {e / d:.2f}", flush=True)
        ratio = statistics.median(x["ratio"] for x in rounds)
        print(f"job engine / direct (median of {args.rounds} rounds): {ratio:.2f} (target <= 1.5: "
              f"{'OK' if ratio <= 1.5 else 'MISS'})", flush=True)
    # Part 2 on a server without background work: the refresh jobs the marking queues wait, so the
    # timed writes pay for the marking itself, not for refreshes running beside them.
    os.environ["MEMPLANE_BACKGROUND_WORK"] = "none"
    with running_server("memplane-bench-stale-") as server, MemoryClient(server.address, server.key) as client:
        stale = stale_marking(client, args.writes)
        print(f"fact write superseding a summarised fact: p50 {stale['summarised_p50_ms']:.1f} ms; the same write"
              f" no summary states: p50 {stale['plain_p50_ms']:.1f} ms; ratio {stale['ratio']:.3f} (target <= 1.10: "
              f"{'OK' if stale['ratio'] <= 1.10 else 'MISS'})", flush=True)
        print("EXPLAIN of the trigger's lookup of summaries by source:\n" + asyncio.run(explain(server.dsn)))
    fake.stop()
    print(f"total run time {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "rounds": rounds, "engine_ratio": ratio,
                                         "stale_marking": stale}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
