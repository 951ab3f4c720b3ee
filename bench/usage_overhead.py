"""What keeping usage per tenant costs a write: two `memplane serve` processes on one embedded
PostgreSQL and Redis, one counting usage (the default) and one with MEMPLANE_USAGE_METERING=false,
written to alternately, batch by batch, so that a shared machine's noise falls on both alike. Each
batch is one Write of BATCH turns (LoCoMo), timed through the SDK; the ratio of the p50s is what
metering adds (target: under 1.02). Metering's own SQL (the flush's upsert) is timed apart and its
EXPLAIN printed: it runs every MEMPLANE_USAGE_FLUSH_SECONDS, off the request path.

Run:  .venv/bin/python bench/usage_overhead.py [--batches 150] [--batch 8] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import asyncpg
from foundation import environment, free_port, load_locomo, memory_texts, pct, running_server  # sets OMP too

from memplane import MemoryClient
from memplane_server.core.metering import CALLS
from memplane_server.stores.postgres.usage import MeteringStore


def start_unmetered(running, data_dir: Path) -> tuple[subprocess.Popen, str]:
    """A second server on the same database and Redis, counting nothing."""
    port = free_port()
    env = dict(os.environ, MEMPLANE_DATABASE_URL=running.dsn, MEMPLANE_REDIS_URL=running.redis_url,
               MEMPLANE_LISTEN=f"127.0.0.1:{port}", MEMPLANE_BOOTSTRAP_TENANT="", MEMPLANE_DATA_DIR=str(data_dir),
               MEMPLANE_USAGE_METERING="false", MEMPLANE_BACKGROUND_WORK="none")
    data_dir.mkdir(parents=True, exist_ok=True)
    out = open(data_dir / "server.out", "w")
    proc = subprocess.Popen([sys.executable, "-m", "memplane_server.cli", "serve"], env=env, stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if re.search(r"memplane listening on", (data_dir / "server.out").read_text()):
            return proc, f"127.0.0.1:{port}"
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError("the unmetered server did not come up:\n" + (data_dir / "server.out").read_text()[-3000:])


async def flush_cost(dsn: str, tenant: str, rounds: int = 20) -> dict:
    """The flush's upsert for one tenant's day (8 methods and the texts embedded), timed."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        store = MeteringStore(pool)
        day = datetime.now(timezone.utc).date()
        counts = Counter({(tenant, day, CALLS, m): 1 for m in ("Write", "Search", "GetMemory", "ListMemories",
                                                                  "Reflect", "Forget", "Foresee", "GetStats")})
        counts[(tenant, day, "texts_embedded", "")] = 8
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            await store.add_counts(counts)
            times.append((time.perf_counter() - start) * 1000)
        plan = await pool.fetch(
            "EXPLAIN (ANALYZE, BUFFERS) INSERT INTO usage_counts AS u (tenant_id, day, metric, name, value)"
            " SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $1)"
            " ON CONFLICT (tenant_id, day, metric, name) DO UPDATE SET value = u.value + EXCLUDED.value",
            tenant, day, CALLS, "Write", 1)
    finally:
        await pool.close()
    return {"p50_ms": round(pct(times, 50), 2), "plan": "\n".join(r[0] for r in plan)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=150, help="Writes to each server")
    ap.add_argument("--batch", type=int, default=8, help="turns per Write")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    turns, _ = load_locomo()
    texts = memory_texts(turns, 2 * args.batches * args.batch)
    times: dict[str, list[float]] = {"metered": [], "unmetered": []}
    with running_server("memplane-usage-bench-") as running:
        proc, unmetered = start_unmetered(running, Path(f"/tmp/memplane-usage-bench-off-{os.getpid()}"))
        try:
            with MemoryClient(running.address, running.key) as on, MemoryClient(unmetered, running.key) as off:
                for client in (on, off):  # warm: the first call of each opens its connections
                    client.write([{"content": "warm-up", "kind": "turn", "session_id": "warm"}])
                for n in range(args.batches):
                    for name, client in (("metered", on), ("unmetered", off))[:: 1 if n % 2 else -1]:
                        i = (2 * n + (name == "unmetered")) * args.batch
                        batch = [{"content": t, "kind": "turn", "session_id": f"s{n}"} for t in texts[i:i + args.batch]]
                        start = time.perf_counter()
                        client.write(batch)
                        times[name].append((time.perf_counter() - start) * 1000)
        finally:
            proc.terminate()
            proc.wait(30)
        flush = asyncio.run(flush_cost(running.dsn, "bench"))
    p50 = {name: pct(values, 50) for name, values in times.items()}
    out = {"environment": environment(), "batches": args.batches, "batch": args.batch,
           "write_p50_ms": {k: round(v, 2) for k, v in p50.items()},
           "write_p95_ms": {k: round(pct(v, 95), 2) for k, v in times.items()},
           "ratio_p50": round(p50["metered"] / p50["unmetered"], 3), "flush_upsert_p50_ms": flush["p50_ms"]}
    print(f"Write of {args.batch} turns, p50: metered {p50['metered']:.1f} ms, unmetered {p50['unmetered']:.1f} ms,"
          f" ratio {out['ratio_p50']} (target < 1.02); p95 {out['write_p95_ms']}")
    print(f"flush upsert (one tenant's day, 9 rows, every few seconds, off the request path): {flush['p50_ms']} ms p50")
    print("EXPLAIN (ANALYZE, BUFFERS) of one row of the flush:\n" + flush["plan"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
