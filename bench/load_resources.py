"""bench/load.py's resource figures: CPU and memory of the server, PostgreSQL and Redis from /proc,
and the rows, windows and lock waits PostgreSQL and Redis report, sampled every few seconds."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import redis.asyncio as aioredis

if TYPE_CHECKING:  # load.py runs as a script; its Stats is only named here
    from load import Stats


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
