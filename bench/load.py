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
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from foundation import TENANT, environment, load_locomo, running_server  # also sets the OMP environment
from load_report import TARGET_RATIO, interval_rows, print_interval, print_summary, summary
from load_resources import Sampler

from memplane import AdminClient, AsyncMemoryClient, MemoryClient
from memplane.errors import MemplaneError

SEED = 20250601
BATCH = 64
SESSION_TURNS = 20  # a client starts a new session after this many turns
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
