"""Load: a bounded mixed load from 8 concurrent clients, throughput and resources per interval.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` (foundation.py's
`running_server`), creates three callers in the bench tenant (a writer key writing GLOBAL, an
agent key bound to `agent-a`, a writer key acting as `agent-b`), preloads `--rows` memories
(sessions of turns plus some facts) and waits until their turn windows are built. Then
`--clients` AsyncMemoryClients (default 8, loopback) run a closed loop for `--duration` seconds
(default 300), each picking its next call at random:

  Write (1-3 session turns, a structured fact, a working-memory item), Search (a LoCoMo
  question; a third with the client's session, so working memory is searched too), GetMemory,
  ListMemories, GetWorkingMemory, and now and then UpdateMemory and a soft Forget;
  every 20 turns a client closes its working session (discarding it) and starts a new one.

The data size stays where the preload left it: once a caller holds more than its share of
`--rows`, its clients hard-forget its oldest session (by filter), as a retention policy would. So the ratio
last/first interval measures what the server does wrong over time (queues, contention, leaks), not
that a bigger table is slower. `--grow` switches the trimming off, to see that second effect.

Per interval (`--interval`, default 60 s) it prints calls/s by RPC, errors by code, p50/p95 ms,
the SDK's retries (rate-limit waits), the RSS of the server, of PostgreSQL (postmaster plus the
private memory of its children) and of Redis, Redis's used memory and keys, the rows of
`memories` (live, dead tuples), sessions awaiting turn windows, and PostgreSQL backends running or
waiting on a lock; then the ratio of the last interval's throughput to the first's.

Run:  .venv/bin/python bench/load.py [--duration 300] [--interval 60] [--clients 8] [--rows 600]
        [--grow] [--server-env NAME=VALUE ...] [--json out.json] [--check]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import time
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from foundation import TENANT, environment, load_locomo, pct, running_server  # also sets the OMP environment

import asyncpg
import redis.asyncio as aioredis
from memplane import AdminClient, AsyncMemoryClient, MemoryClient
from memplane.errors import MemplaneError

SEED = 20250601
BATCH = 64
SESSION_TURNS = 20  # a client starts a new session after this many turns
TARGET_RATIO = 0.9
CALL_TIMEOUT = 30.0
ATTRIBUTES = ("city", "employer", "pet", "hobby", "team", "car", "language", "sport")
VALUES = ("Shanghai", "Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Lima", "Oslo", "Denver", "Hanoi")
# What a client does next, and how often (relative weights).
MIX = {
    "write_turns": 22, "write_fact": 8, "write_working": 10, "search": 30, "get": 10, "list": 8,
    "get_working": 5, "update": 4, "forget_soft": 3,
}


@dataclass
class Caller:
    """One identity of the tenant and the rows it wrote, by session, oldest session first."""

    name: str
    key: str
    agent_id: str | None
    share: int
    sessions: OrderedDict = field(default_factory=OrderedDict)  # session -> {id: still pickable}

    @property
    def rows(self) -> int:
        return sum(len(ids) for ids in self.sessions.values())

    def add(self, session: str, memory_id: str) -> None:
        self.sessions.setdefault(session, {}).setdefault(memory_id, True)

    def pick(self, rng: random.Random) -> tuple[str, str] | None:
        """(session, id) of a pickable row of a newer session: trimming takes the oldest, so no race with it."""
        names = list(self.sessions)
        for _ in range(4):
            if not names:
                return None
            session = names[rng.randrange(len(names) // 2, len(names))]
            live = [i for i, ok in self.sessions[session].items() if ok]
            if live:
                return session, rng.choice(live)
        return None


@dataclass
class Record:
    t: float  # seconds since the load started, at the end of the call
    rpc: str
    ms: float
    code: str  # "OK" or the gRPC code name
    reason: str = ""


class Stats:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.retries: list[float] = []  # when the SDK waited to retry (rate limited or unavailable)
        self.t0 = 0.0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def call(self, rpc: str, coro):
        start = time.monotonic()
        try:
            result = await coro
        except MemplaneError as exc:
            self.records.append(Record(self.now(), rpc, (time.monotonic() - start) * 1000, exc.code.name, exc.reason))
            return None
        self.records.append(Record(self.now(), rpc, (time.monotonic() - start) * 1000, "OK"))
        return result


def count_retries(client: AsyncMemoryClient, stats: Stats) -> None:
    """Counts the SDK's waits before a retry (they are otherwise invisible: the call succeeds later)."""
    transport = client._transport
    sleep = transport._sleep

    async def counted(delay: float) -> None:
        stats.retries.append(stats.now())
        await sleep(delay)

    transport._sleep = counted


# ---------------------------------------------------------------- clients


class Client:
    def __init__(self, n: int, caller: Caller, address: str, texts: list[str], questions: list[str],
                 stats: Stats, args: argparse.Namespace) -> None:
        self.n, self.caller, self.stats, self.grow = n, caller, stats, args.grow
        self.mix, self.session_turns = args.mix, args.session_turns
        self.rng = random.Random(SEED + n)
        self.texts, self.questions = texts, questions
        self.client = AsyncMemoryClient(address, caller.key, agent_id=caller.agent_id, default_timeout=CALL_TIMEOUT)
        count_retries(self.client, stats)
        self.session_no = 0
        self.turns_in_session = 0
        self.text_no = self.rng.randrange(len(texts))

    @property
    def session(self) -> str:
        return f"load-c{self.n}-s{self.session_no}"

    def next_text(self) -> str:
        self.text_no += 1
        return self.texts[self.text_no % len(self.texts)]

    async def run(self, until: float) -> None:
        ops, weights = list(self.mix), list(self.mix.values())
        while self.stats.now() < until:
            op = self.rng.choices(ops, weights)[0]
            await getattr(self, op)()

    async def remember(self, result) -> None:
        if result is None:
            return
        for m in result.memories:
            if m.layer.name != "WORKING":
                self.caller.add(m.session_id, m.id)
        await self.trim()

    async def trim(self) -> None:
        """Keeps the caller at its share of rows: hard-forgets its oldest sessions, whole, as a retention
        policy would. (Forgetting single turns of a session empties all of that session's windows.)"""
        if self.grow:
            return
        sessions = self.caller.sessions
        while self.caller.rows > self.caller.share and len(sessions) > 1:
            oldest, _ = sessions.popitem(last=False)
            await self.stats.call("Forget", self.client.forget(session_id=oldest, hard=True, reason="load trim"))

    async def write_turns(self) -> None:
        n = self.rng.choice((1, 1, 2, 3))
        items = [{"content": self.next_text(), "kind": "turn", "session_id": self.session} for _ in range(n)]
        await self.remember(await self.stats.call("Write", self.client.write(items)))
        self.turns_in_session += n
        if self.turns_in_session >= self.session_turns:
            # The working session ends with the conversation; its items are not promoted (that would add rows).
            await self.stats.call("CloseSession", self.client.close_session(self.session, promote=False))
            self.session_no += 1
            self.turns_in_session = 0

    async def write_fact(self) -> None:
        attribute, value = self.rng.choice(ATTRIBUTES), self.rng.choice(VALUES)
        entity = f"person-{self.caller.name}-{self.rng.randrange(20)}"
        item = {"content": f"{entity}'s {attribute} is {value}", "kind": "fact", "entity": entity,
                "attribute": attribute, "value": value, "session_id": self.session}
        await self.remember(await self.stats.call("Write", self.client.write([item])))

    async def write_working(self) -> None:
        item = {"content": self.next_text(), "kind": "turn", "layer": "working", "session_id": self.session,
                "ttl": 900}
        await self.stats.call("Write", self.client.write([item]))

    async def search(self) -> None:
        q = self.rng.choice(self.questions)
        filters = {"session_id": self.session} if self.rng.random() < 1 / 3 else {}
        await self.stats.call("Search", self.client.search(q, top_k=10, **filters))

    async def get(self) -> None:
        picked = self.caller.pick(self.rng)
        if picked is not None:
            await self.stats.call("GetMemory", self.client.get_memory(picked[1]))

    async def list(self) -> None:
        filters = self.rng.choice(({}, {"kinds": "fact"}, {"session_id": self.session}))
        await self.stats.call("ListMemories", self.client.list_memories(page_size=20, **filters))

    async def get_working(self) -> None:
        await self.stats.call("GetWorkingMemory", self.client.get_working_memory(self.session))

    async def update(self) -> None:
        picked = self.caller.pick(self.rng)
        if picked is None:
            return
        if self.rng.random() < 0.5:
            changes = {"tags": [f"t{self.rng.randrange(5)}"]}
        else:
            changes = {"content": self.next_text()}
        await self.stats.call("UpdateMemory", self.client.update_memory(picked[1], **changes))

    async def forget_soft(self) -> None:
        picked = self.caller.pick(self.rng)
        if picked is None:
            return
        session, memory_id = picked
        self.caller.sessions[session][memory_id] = False  # still a row (status deleted) until trimmed
        await self.stats.call("Forget", self.client.forget(ids=[memory_id], reason="load"))

    async def close(self) -> None:
        await self.client.close()


# ---------------------------------------------------------------- setup


def make_callers(address: str, platform_key: str, rows: int) -> list[Caller]:
    share = max(SESSION_TURNS, rows // 3)
    with AdminClient(address, platform_key) as admin:
        for agent in ("agent-a", "agent-b"):
            admin.create_agent(TENANT, agent)
        writer = admin.create_api_key(tenant_id=TENANT, role="writer", display_name="load global").secret
        agent_a = admin.create_api_key(tenant_id=TENANT, agent_id="agent-a", role="agent", display_name="load a").secret
        writer_b = admin.create_api_key(tenant_id=TENANT, role="writer", display_name="load b").secret
    return [Caller("global", writer, None, share), Caller("agent-a", agent_a, None, share),
            Caller("agent-b", writer_b, "agent-b", share)]


def preload(address: str, callers: list[Caller], texts: list[str], rows: int) -> dict:
    """Each caller's share of rows: sessions of SESSION_TURNS turns, every fifth item a fact."""
    t0 = time.perf_counter()
    rng = random.Random(SEED)
    written = 0
    for c in callers:
        items = []
        for i in range(c.share):
            session = f"pre-{c.name}-{i // SESSION_TURNS}"
            if i % 5 == 4:
                attribute, value = rng.choice(ATTRIBUTES), rng.choice(VALUES)
                entity = f"person-{c.name}-{rng.randrange(20)}"
                items.append({"content": f"{entity}'s {attribute} is {value}", "kind": "fact", "entity": entity,
                              "attribute": attribute, "value": value, "session_id": session})
            else:
                items.append({"content": texts[(written + i) % len(texts)], "kind": "turn", "session_id": session})
        with MemoryClient(address, c.key, agent_id=c.agent_id) as client:
            for i in range(0, len(items), BATCH):
                for m in client.write(items[i:i + BATCH], timeout=600).memories:
                    c.add(m.session_id, m.id)
        written += c.share
    loaded = time.perf_counter()
    # Writes queue their sessions even when no worker builds windows; then there is nothing to wait for.
    builds = os.environ.get("MEMPLANE_CONTEXT_WINDOW") != "0" and os.environ.get("MEMPLANE_WORKERS") != "0"
    with MemoryClient(address, callers[0].key) as client:
        while builds and client.get_stats(timeout=60).sessions_awaiting_context:
            time.sleep(1.0)
    return {"rows": sum(c.rows for c in callers), "write_s": loaded - t0, "windows_s": time.perf_counter() - loaded}


async def warm_up(clients: list[Client], seconds: float) -> None:
    """Every kind of call a few times (jieba's first Chinese-free query, pools, caches), untimed."""
    stats = clients[0].stats
    until = stats.now() + seconds
    await asyncio.gather(*(c.run(until) for c in clients))


# ---------------------------------------------------------------- resources


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssShmem, Threads of a process (kB, count); empty when it is gone."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssShmem", "Threads", "PPid"):
                out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU time of a process (and, with reaped, of its children that have exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / TICK


def host_busy_seconds() -> float:
    """CPU time all cores spent on anything (everyone on the machine), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICK  # minus idle and iowait


def children_of(ppid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            if proc_status(int(entry.name)).get("PPid") == ppid:
                kids.append(int(entry.name))
    return kids


class Sampler:
    """Resource figures of the server, PostgreSQL and Redis, every few seconds."""

    def __init__(self, server_pid: int, dsn: str, redis_url: str, stats: Stats) -> None:
        self.server_pid, self.dsn, self.redis_url, self.stats = server_pid, dsn, redis_url, stats
        self.samples: list[dict] = []
        self.windows: dict = {}  # memory id -> the fingerprint of its window at the last sample
        self.built = self.emptied = 0

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)
        self.postmaster = proc_status(await self.conn.fetchval("SELECT pg_backend_pid()"))["PPid"]
        self.redis = aioredis.Redis.from_url(self.redis_url)
        self.redis_pid = int((await self.redis.info("server"))["process_id"])

    async def close(self) -> None:
        await self.conn.close()
        await self.redis.aclose()

    async def sample(self) -> dict:
        server = proc_status(self.server_pid)
        pg_procs = [self.postmaster, *children_of(self.postmaster)]
        pg = [proc_status(p) for p in pg_procs]
        rd = proc_status(self.redis_pid)
        info = await self.redis.info("memory")
        row = await self.conn.fetchrow(
            "SELECT (SELECT count(*) FROM memories) AS rows,"
            " (SELECT count(*) FROM memories WHERE status = 'active') AS active,"
            " (SELECT count(*) FROM memory_history) AS history,"
            " (SELECT count(*) FROM write_requests) AS write_requests,"
            " (SELECT count(*) FROM context_queue) AS awaiting,"
            " (SELECT coalesce(extract(epoch FROM clock_timestamp() - min(first_marked_at)), 0) FROM context_queue)::float"
            "  AS window_lag_s,"
            " (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'memories') AS dead,"
            " (SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'memories') AS autovacuums,"
            " pg_total_relation_size('memories') AS table_bytes,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active'"
            "  AND pid <> pg_backend_pid()) AS running,"
            " (SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock') AS lock_waits,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS connections"
        )
        own = os.times()
        s = {
            "t": self.stats.now(),
            "cpu_server_s": cpu_seconds(self.server_pid),
            "cpu_postgres_s": cpu_seconds(self.postmaster, reaped=True) + sum(cpu_seconds(p) for p in pg_procs[1:]),
            "cpu_redis_s": cpu_seconds(self.redis_pid), "cpu_bench_s": own.user + own.system,
            "cpu_host_s": host_busy_seconds(), "loadavg": os.getloadavg()[0],
            "server_rss_mb": server.get("VmRSS", 0) / 1024, "server_threads": server.get("Threads", 0),
            "pg_rss_mb": (pg[0].get("VmRSS", 0) + sum(p.get("RssAnon", 0) for p in pg[1:])) / 1024,
            "pg_processes": len(pg_procs),
            "redis_rss_mb": rd.get("VmRSS", 0) / 1024, "redis_used_mb": info["used_memory"] / 2**20,
            "redis_keys": await self.redis.dbsize(),
            **{k: row[k] for k in row.keys()},
        }
        s["table_mb"] = s.pop("table_bytes") / 2**20
        # Windows (re)built or emptied since the last sample: their fingerprints changed.
        now = {r["id"]: r["context_of"] for r in await self.conn.fetch(
            "SELECT id, context_of FROM memories WHERE kind = 'turn' AND context_of IS NOT NULL")}
        for memory_id, mark in now.items():
            if self.windows.get(memory_id) != mark:
                if mark:
                    self.built += 1
                elif self.windows.get(memory_id):
                    self.emptied += 1
        self.windows = now
        s["windows_built"], s["windows_emptied"] = self.built, self.emptied
        waiting = await self.conn.fetch(
            "SELECT wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q, count(*) AS n"
            " FROM pg_stat_activity WHERE wait_event_type = 'Lock' GROUP BY 1, 2 ORDER BY 3 DESC")
        s["lock_waiters"] = [(r["n"], f"{r['wait_event']}: {r['q']}") for r in waiting]
        self.samples.append(s)
        return s

    async def run(self, until: float, every: float) -> None:
        while self.stats.now() < until:
            await self.sample()
            await asyncio.sleep(min(every, max(0.0, until - self.stats.now())))
        await self.sample()


# ---------------------------------------------------------------- report

RPCS = ("Write", "Search", "GetMemory", "ListMemories", "GetWorkingMemory", "UpdateMemory", "Forget", "CloseSession")


def interval_rows(stats: Stats, samples: list[dict], duration: float, interval: float) -> list[dict]:
    n = max(1, int(duration // interval + 1e-9))
    rows = []
    for i in range(n):
        lo, hi = i * interval, min(duration, (i + 1) * interval)
        recs = [r for r in stats.records if lo <= r.t < hi]
        ok = [r for r in recs if r.code == "OK"]
        by_rpc = {}
        for rpc in RPCS:
            ms = [r.ms for r in ok if r.rpc == rpc]
            by_rpc[rpc] = {"ok": len(ms), "per_s": len(ms) / (hi - lo),
                           "p50": statistics.median(ms) if ms else None, "p95": pct(ms, 95) if ms else None}
        errors = Counter(f"{r.rpc} {r.code} {r.reason}".strip() for r in recs if r.code != "OK")
        inside = [s for s in samples if lo <= s["t"] <= hi + 1] or samples[-1:]
        last = inside[-1] if inside else {}
        cpu, windows = {}, {}
        if samples:
            a_ = min(samples, key=lambda x: abs(x["t"] - lo))
            b_ = min(samples, key=lambda x: abs(x["t"] - hi))
            span = b_["t"] - a_["t"]
            if span > 0:
                for k in ("server", "postgres", "redis", "bench", "host"):
                    cpu[k] = (b_[f"cpu_{k}_s"] - a_[f"cpu_{k}_s"]) / span  # cores busy on average
                cpu["others"] = max(0.0, cpu["host"] - cpu["server"] - cpu["postgres"] - cpu["redis"] - cpu["bench"])
                windows = {k: (b_[k] - a_[k]) * (hi - lo) / span for k in ("windows_built", "windows_emptied")}
        rows.append({
            "from_s": lo, "to_s": hi, "calls_per_s": len(ok) / (hi - lo), "ok": len(ok), "errors": dict(errors),
            "retries": sum(1 for t in stats.retries if lo <= t < hi), "rpc": by_rpc,
            "all_p50": statistics.median([r.ms for r in ok]) if ok else None,
            "all_p95": pct([r.ms for r in ok], 95) if ok else None,
            "resources": last, "cpu_cores": cpu, "windows": windows,
            "lock_waiters": dict(sum((Counter({q: n}) for smp in inside for n, q in smp.get("lock_waiters", [])),
                                     Counter())),
            "calls_per_server_cpu_s": len(ok) / (cpu["server"] * (hi - lo)) if cpu.get("server") else None,
            "max": {k: max(s[k] for s in inside) for k in ("server_rss_mb", "pg_rss_mb", "redis_rss_mb", "running",
                                                           "lock_waits", "awaiting")} if inside else {},
        })
    return rows


def fmt(v, width=7, digits=1) -> str:
    return f"{v:{width}.{digits}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def print_interval(r: dict) -> None:
    res, mx = r["resources"], r["max"]
    print(f"\n[{r['from_s']:5.0f}-{r['to_s']:4.0f} s] {r['calls_per_s']:.1f} calls/s ok ({r['ok']}), "
          f"p50 {fmt(r['all_p50'], 0)} ms, p95 {fmt(r['all_p95'], 0)} ms; errors {sum(r['errors'].values())}, "
          f"SDK retries {r['retries']}", flush=True)
    print(f"  {'rpc':18s} {'calls/s':>8s} {'p50 ms':>8s} {'p95 ms':>8s}")
    for rpc, v in r["rpc"].items():
        if v["ok"]:
            print(f"  {rpc:18s} {v['per_s']:8.2f} {fmt(v['p50'], 8)} {fmt(v['p95'], 8)}")
    for what, n in sorted(r["errors"].items()):
        print(f"  error {what}: {n}")
    cpu = r["cpu_cores"]
    if cpu:
        print(f"  CPU (cores busy): server {cpu['server']:.2f}, postgres {cpu['postgres']:.2f}, redis {cpu['redis']:.2f},"
              f" this bench {cpu['bench']:.2f}, other processes {cpu['others']:.2f} (load average {res.get('loadavg', 0):.1f});"
              f" {fmt(r['calls_per_server_cpu_s'], 0)} calls per server CPU second")
    if r["windows"]:
        w = r["windows"]
        print(f"  turn windows built {w['windows_built']:.0f}, emptied {w['windows_emptied']:.0f} "
              f"({w['windows_built'] / max(1, r['ok']):.1f} built per call)")
    if res:
        print(f"  RSS MB: server {res['server_rss_mb']:.0f} (threads {res['server_threads']}), postgres "
              f"{res['pg_rss_mb']:.0f} ({res['pg_processes']} processes), redis {res['redis_rss_mb']:.0f} "
              f"(used {res['redis_used_mb']:.1f} MB, {res['redis_keys']} keys)")
        print(f"  memories: {res['rows']} rows ({res['active']} active, {res['dead']} dead tuples, "
              f"{res['table_mb']:.1f} MB, autovacuums {res['autovacuums']}), history {res['history']}, "
              f"write_requests {res['write_requests']}; "
              f"sessions awaiting windows {res['awaiting']} (max {mx['awaiting']}, oldest {res['window_lag_s']:.0f} s); "
              f"pg backends running {res['running']} (max {mx['running']}), waiting on a lock max {mx['lock_waits']}",
              flush=True)
    for q, n in Counter(r["lock_waiters"]).most_common(3):
        print(f"  waiting on a lock in {n} backend-samples: {q}")


def summary(rows: list[dict], stats: Stats) -> dict:
    first, last = rows[0], rows[-1]
    errors = sum(1 for r in stats.records if r.code != "OK")
    ratio = last["calls_per_s"] / first["calls_per_s"] if first["calls_per_s"] else float("nan")
    per_rpc = {rpc: (last["rpc"][rpc]["per_s"] / first["rpc"][rpc]["per_s"]) if first["rpc"][rpc]["per_s"] else None
               for rpc in RPCS}
    res0, res1 = first["resources"], last["resources"]
    c0, c1 = first["calls_per_server_cpu_s"], last["calls_per_server_cpu_s"]
    return {"first_calls_per_s": first["calls_per_s"], "last_calls_per_s": last["calls_per_s"], "ratio": ratio,
            "calls_per_server_cpu_s": (c0, c1), "ratio_per_cpu": c1 / c0 if c0 and c1 else None,
            "others_cores": (first["cpu_cores"].get("others"), last["cpu_cores"].get("others")),
            "ratio_by_rpc": per_rpc, "errors": errors, "calls": len(stats.records),
            "retries": len(stats.retries),
            "server_rss_mb": (res0.get("server_rss_mb"), res1.get("server_rss_mb")),
            "pg_rss_mb": (res0.get("pg_rss_mb"), res1.get("pg_rss_mb")),
            "redis_rss_mb": (res0.get("redis_rss_mb"), res1.get("redis_rss_mb")),
            "rows": (res0.get("rows"), res1.get("rows"))}


def print_summary(s: dict, n_intervals: int) -> None:
    print(f"\nthroughput: first interval {s['first_calls_per_s']:.1f} calls/s, last {s['last_calls_per_s']:.1f} "
          f"calls/s; ratio last/first {s['ratio']:.2f} over {n_intervals} intervals "
          f"(target >= {TARGET_RATIO}: {'OK' if s['ratio'] >= TARGET_RATIO else 'MISS'})")
    if s["ratio_per_cpu"] is not None:
        print(f"  per server CPU second: first {s['calls_per_server_cpu_s'][0]:.1f}, last {s['calls_per_server_cpu_s'][1]:.1f}"
              f" calls; ratio {s['ratio_per_cpu']:.2f} (other processes kept {s['others_cores'][0]:.2f} -> "
              f"{s['others_cores'][1]:.2f} cores busy: the plain ratio is only fair when that stays put)")
    print("  by rpc: " + ", ".join(f"{k} {v:.2f}" for k, v in s["ratio_by_rpc"].items() if v is not None))
    print(f"errors: {s['errors']} of {s['calls']} calls (target 0: {'OK' if s['errors'] == 0 else 'MISS'}); "
          f"SDK retries {s['retries']}")
    print("RSS MB first -> last interval: server {:.0f} -> {:.0f}, postgres {:.0f} -> {:.0f}, redis {:.0f} -> {:.0f};"
          " rows {} -> {}".format(*s["server_rss_mb"], *s["pg_rss_mb"], *s["redis_rss_mb"], *s["rows"]))


# ---------------------------------------------------------------- main


async def run_load(args, server, callers: list[Caller], texts: list[str], questions: list[str]) -> tuple:
    stats = Stats()
    stats.t0 = time.monotonic()
    clients = [Client(i, callers[i % len(callers)], server.address, texts, questions, stats, args)
               for i in range(args.clients)]
    sampler = Sampler(server.proc.pid, server.dsn, server.redis_url, stats)
    await sampler.open()
    try:
        if args.warmup:
            print(f"warm-up {args.warmup:.0f} s (untimed)", flush=True)
            await warm_up(clients, args.warmup)
        stats.records.clear()
        stats.retries.clear()
        sampler.samples.clear()
        stats.t0 = time.monotonic()
        print(f"load: {args.clients} clients for {args.duration:.0f} s, intervals of {args.interval:.0f} s"
              f" ({'growing' if args.grow else f'steady at ~{args.rows} rows'}; sessions of {args.session_turns} turns;"
              f" mix {', '.join(f'{k}={v:g}' for k, v in args.mix.items())})", flush=True)

        async def reporter() -> None:
            shown = 0
            while True:
                done = int(stats.now() // args.interval)
                while shown < min(done, int(args.duration // args.interval)):
                    print_interval(interval_rows(stats, sampler.samples, (shown + 1) * args.interval,
                                                 args.interval)[shown])
                    shown += 1
                if stats.now() >= args.duration:
                    return
                await asyncio.sleep(1.0)

        await asyncio.gather(*(c.run(args.duration) for c in clients), sampler.run(args.duration, args.sample),
                             reporter())
    finally:
        for c in clients:
            await c.close()
        await sampler.close()
    # Calls still running at the end finish after `duration`; they fall outside every interval.
    return stats, sampler.samples


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of measured load (default 300)")
    ap.add_argument("--interval", type=float, default=60.0, help="seconds per reported interval (default 60)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rows", type=int, default=600, help="rows preloaded and kept (default 600)")
    ap.add_argument("--grow", action="store_true", help="do not forget the oldest rows: the table grows")
    ap.add_argument("--warmup", type=float, default=10.0, help="untimed seconds of load before measuring")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between resource samples")
    ap.add_argument("--mix", default="", metavar="OP=WEIGHT,...",
                    help=f"change the weights of the call mix ({', '.join(f'{k}={v}' for k, v in MIX.items())})")
    ap.add_argument("--session-turns", type=int, default=SESSION_TURNS,
                    help=f"turns a client writes to a session before it starts a new one (default {SESSION_TURNS})")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the server, e.g. MEMPLANE_CONTEXT_WINDOW=0 (repeatable)")
    ap.add_argument("--json", type=Path, help="also write the figures here as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when the ratio or the errors miss the target")
    args = ap.parse_args()
    if args.duration <= 0 or args.interval <= 0 or args.clients < 1 or args.rows < 3 * SESSION_TURNS:
        ap.error(f"--duration and --interval must be positive, --clients >= 1, --rows >= {3 * SESSION_TURNS}")
    mix = dict(MIX)
    for pair in filter(None, args.mix.split(",")):
        op, _, weight = pair.partition("=")
        if op not in MIX or not weight.replace(".", "", 1).isdigit():
            ap.error(f"--mix takes OP=WEIGHT pairs with OP one of {', '.join(MIX)}, not {pair!r}")
        mix[op] = float(weight)
    args.mix = mix
    for pair in args.server_env:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("MEMPLANE_"):
            ap.error(f"--server-env takes MEMPLANE_NAME=VALUE, not {pair!r}")
        os.environ[name] = value  # running_server passes its environment on to `memplane serve`
    # A background job ignores SIGINT; SIGTERM still stops the server and removes everything.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.perf_counter()
    env = environment()
    turns, questions = load_locomo()
    texts = [f"{speaker}: {text}" for speaker, text in turns]
    print(f"environment: {env['cpu_count']} cores, load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}; server env: {args.server_env or 'defaults'}",
          flush=True)
    with running_server("memplane-load-") as server:
        callers = make_callers(server.address, server.platform_key, args.rows)
        print(f"preloading {callers[0].share * 3} rows ({len(callers)} callers)", flush=True)
        pre = preload(server.address, callers, texts, args.rows)
        print(f"  written in {pre['write_s']:.1f} s, windows built {pre['windows_s']:.1f} s later", flush=True)
        stats, samples = asyncio.run(run_load(args, server, callers, texts, questions))
        end_load = os.getloadavg()
    rows = interval_rows(stats, samples, args.duration, args.interval)
    if args.duration % args.interval > 1e-6:
        print(f"\n(the last {args.duration % args.interval:.0f} s do not fill an interval and are not reported)")
    s = summary(rows, stats)
    print_summary(s, len(rows))
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in end_load)}; total run time "
          f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "args": vars(args) | {"json": str(args.json)},
                                         "preload": pre, "intervals": rows, "summary": s, "samples": samples},
                                        indent=2, default=str))
    if args.check and (s["ratio"] < TARGET_RATIO or s["errors"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
